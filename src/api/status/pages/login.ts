/** `/-/status/login`: the sign-in form (a token, as the API takes it). */
import { html } from '../html.js';
import { layout, viewerLabel, type PageContext } from '../layout.js';

export function loginPage(ctx: PageContext, next: string, error: string | null): string {
  const who = viewerLabel(ctx.viewer);
  const body = html`<h1>Sign in</h1>
${error ? html`<p class="error" role="alert">${error}</p>` : ''}
${who ? html`<p>You are signed in as <strong>${who}</strong>. Another token replaces it.</p>` : ''}
<form class="signin" method="post" action="/-/status/login">
<input type="hidden" name="next" value="${next}">
<label for="token">Token<input id="token" name="token" type="password" autocomplete="off" required placeholder="tsk_user_…"></label>
<button type="submit">Sign in</button>
</form>
<p class="muted">Use a user or admin token (made with <code>createToken</code> or <code>tagsched-admin token create</code>). It is checked as the API checks it and kept in a cookie that scripts on other sites cannot read or send; a revoked or expired token signs you out.</p>`;
  return layout(ctx, { title: 'Sign in', section: 'signin' }, body);
}
