/**
 * User information (`user:password@`) in the URLs of a recipe. A recipe is public: the manifest
 * records it, and the server shows a registered image's recipe to anyone. So a mirror or an APT
 * source URI that carries a user name or password is refused (by the recipe's check here and by
 * the server when a manifest is registered); credentials go in an apt auth.conf file given at build
 * time (`tagsched-image build --apt-auth FILE`), which the build uses and keeps out of the image and
 * the manifest. Pure: the builder and the server read this one rule.
 */

/**
 * A URL's scheme and authority up to its user information's `@`: the userinfo of RFC 3986 holds no
 * `/`, `?` or `#` (nor a backslash, which ends the authority of an http URL for WHATWG's parser), and
 * like that parser the last `@` of the authority ends it.
 */
const USERINFO = /([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#\\\s]*@/;

/** A word of `text` that WHATWG's parser (zod's, Node's) reads as a URL with user information, such as `https:user:pw@host`. */
function parsedWithUserInfo(word: string): URL | null {
  try {
    const url = new URL(word);
    return url.username !== '' || url.password !== '' ? url : null;
  } catch {
    return null;
  }
}

/** What a URL with user information is told to do instead. */
export const USERINFO_ADVICE =
  'holds a user name or password, which the recipe must not (the manifest records it and the server shows it to anyone): ' +
  'give the URL without them, and the credentials in an apt auth.conf file (apt_auth.conf(5): "machine HOST/PATH login USER password SECRET") ' +
  'with tagsched-image build --apt-auth FILE, which the build uses and keeps out of the image and its manifest';

/** Whether `text` (a URL, or a text such as a deb822 source) has a URL with user information. */
export function hasUserInfo(text: string): boolean {
  return USERINFO.test(text) || text.split(/\s+/).some((word) => parsedWithUserInfo(word) !== null);
}

/** `text` with the user information of each of its URLs removed (`https://u:p@host/x` → `https://host/x`). */
export function withoutUserInfo(text: string): string {
  return text.replace(new RegExp(USERINFO.source, 'g'), '$1').replace(/\S+/g, (word) => {
    const url = parsedWithUserInfo(word);
    if (!url) return word;
    url.username = '';
    url.password = '';
    return url.href;
  });
}
