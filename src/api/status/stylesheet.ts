/** The one stylesheet of the status pages, served at STYLESHEET_PATH (no JavaScript, no web fonts). */

export const STYLESHEET_PATH = '/-/status/style.css';

export const STYLESHEET = `
:root{--fg:#1d1d1f;--muted:#5f6368;--line:#dadce0;--bg:#fff;--panel:#f6f7f9;--link:#0b57d0;--ok:#137333;--busy:#0b57d0;--warn:#9a5b00;--bad:#a50e0e}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
a{color:var(--link);text-decoration:none}a:hover{text-decoration:underline}
code,pre,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:.88em}
header.top{background:#202124;color:#fff}
header.top .bar{max-width:76rem;margin:0 auto;padding:.5rem 1rem;display:flex;flex-wrap:wrap;align-items:center;gap:.25rem 1rem}
header.top .brand{font-weight:700;color:#fff;margin-right:.5rem}
header.top nav{display:flex;flex-wrap:wrap;gap:.1rem .2rem;flex:1}
header.top nav a{color:#e8eaed;padding:.3rem .55rem;border-radius:4px}
header.top nav a[aria-current=page]{background:#3c4043;color:#fff}
header.top .who{display:flex;align-items:center;gap:.5rem;color:#bdc1c6;font-size:.9em}
header.top .who a{color:#8ab4f8}
header.top form{margin:0}
button,.button{font:inherit;padding:.35rem .8rem;border:1px solid var(--line);border-radius:4px;background:#fff;color:var(--fg);cursor:pointer}
header.top button{background:transparent;color:#8ab4f8;border-color:#5f6368;padding:.15rem .6rem}
main{max-width:76rem;margin:0 auto;padding:1rem 1rem 3rem}
h1{font-size:1.5rem;margin:.6rem 0 1rem;word-break:break-word}
h2{font-size:1.15rem;margin:2rem 0 .6rem}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
.muted{color:var(--muted)}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;border:1px solid var(--line);border-radius:6px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.4rem .65rem;border-bottom:1px solid var(--line);vertical-align:top}
tr:last-child td{border-bottom:0}
th{background:var(--panel);font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code{overflow-wrap:anywhere}
code.tag{display:inline-block;margin:0 .1rem .2rem 0;padding:0 .3rem;background:#eef1f5;border-radius:3px;line-height:1.6}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1.2rem;margin:0}
dl.facts dt{font-weight:600;color:var(--muted)}dl.facts dd{margin:0;word-break:break-word}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(15rem,1fr));gap:1rem;margin:1rem 0}
.card{border:1px solid var(--line);border-radius:8px;padding:.9rem 1rem;background:var(--panel)}
section.card{margin:1rem 0}
.card h2{margin:0 0 .4rem}.card p{margin:.3rem 0}
.big{font-size:1.7rem;font-weight:700}
.chips{display:flex;flex-wrap:wrap;gap:.4rem;margin:.5rem 0 1rem;padding:0;list-style:none}
.chips a,.chips span{display:inline-block;padding:.2rem .7rem;border:1px solid var(--line);border-radius:999px;background:#fff}
.chips a[aria-current=true]{background:#e8f0fe;border-color:#8ab4f8}
form.filters{display:flex;flex-wrap:wrap;align-items:flex-end;gap:.6rem 1rem;margin:0 0 1rem;padding:.8rem 1rem;background:var(--panel);border:1px solid var(--line);border-radius:8px}
form.filters label,form.signin label{display:flex;flex-direction:column;gap:.2rem;font-size:.9em;color:var(--muted)}
input,select{font:inherit;padding:.35rem .5rem;border:1px solid #bbb;border-radius:4px;background:#fff;color:var(--fg);max-width:100%}
form.signin{max-width:32rem;display:flex;flex-direction:column;gap:.8rem}
form.signin input{width:100%}
.pager{display:flex;flex-wrap:wrap;align-items:center;gap:1rem;margin:.8rem 0}
.badge{display:inline-block;padding:0 .5rem;border-radius:4px;font-size:.85em;font-weight:600;white-space:nowrap;border:1px solid currentColor}
.s-IDLE,.s-SUCCESS,.s-READY,.s-RUNNING-instance{color:var(--ok)}
.s-BUSY,.s-RUNNING,.s-ASSIGNED,.s-LAUNCHING,.s-WAITING_FOR_CAPACITY{color:var(--busy)}
.s-DRAINING,.s-PENDING,.s-STOPPING,.s-WAITING_FOR_WORKERS,.s-WAITING_FOR_PROVISIONING,.s-WAITING_FOR_POOL_LIMIT,.s-BLOCKED,.s-SKIPPED{color:var(--warn)}
.s-DISCONNECTED,.s-DISABLED,.s-FAILURE,.s-ERROR,.s-ABORTED,.s-FAILED,.s-UNSCHEDULABLE,.s-degraded{color:var(--bad)}
.s-INACTIVE,.s-TERMINATED,.s-COMPLETED,.s-NOT_PENDING,.s-ORCHESTRATED{color:var(--muted)}
.notice{padding:.6rem .9rem;border-radius:6px;background:#fef7e0;border:1px solid #f9d67a;margin:.8rem 0}
.error{padding:.6rem .9rem;border-radius:6px;background:#fce8e6;border:1px solid #f4b4ae;margin:.8rem 0}
pre.log{background:#202124;color:#e8eaed;padding:.8rem 1rem;border-radius:6px;overflow-x:auto;white-space:pre-wrap;word-break:break-all;max-height:70vh;overflow-y:auto;margin:.4rem 0}
ul.plain{margin:.3rem 0;padding-left:1.2rem}
footer{max-width:76rem;margin:0 auto;padding:1rem;color:var(--muted);font-size:.85em;border-top:1px solid var(--line)}
@media (max-width:40rem){
  body{font-size:14px}
  main{padding:.6rem .6rem 2rem}
  h1{font-size:1.25rem}
  dl.facts{grid-template-columns:1fr;gap:0}
  dl.facts dd{margin-bottom:.45rem}
  th,td{padding:.35rem .45rem}
  header.top .bar{padding:.4rem .6rem;justify-content:space-between}
  header.top nav{order:3;flex-basis:100%;justify-content:space-between}
  header.top nav a{padding:.25rem .45rem}
  .hide-narrow{display:none}
  table.stack thead{display:none}
  table.stack,table.stack tbody,table.stack tr{display:block;width:100%}
  table.stack tr{padding:.35rem 0;border-bottom:1px solid var(--line)}
  table.stack tr:last-child{border-bottom:0}
  table.stack td{display:grid;grid-template-columns:6.5rem minmax(0,1fr);gap:.6rem;border:0;padding:.12rem .6rem}
  table.stack td::before{content:attr(data-label);font-weight:600;color:var(--muted)}
  table.stack td.hide-narrow{display:none}
}
`;
