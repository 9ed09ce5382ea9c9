/**
 * The interface layer (src/api/: the schema's resolvers, the loaders, the status pages, the metrics
 * endpoint, the probes, ws) runs no SQL of its own: its reads and writes are named functions of the
 * services and of scheduler/storage/, which a status page and the GraphQL field answering the same
 * question share. No file under src/api/ holds a string that is a SQL statement (`select … from`,
 * `update … set`, `insert into`, `delete from`, in any case), nor runs a statement itself
 * (`em.execute`, `getConnection().execute`, a query builder or knex). The dependency check keeps the
 * database helpers (src/storage/db/) out of api/ too (.dependency-cruiser.cjs, interface-runs-no-sql).
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const INTERFACE = 'src/api';

/** The shapes of a SQL statement in a string (its parameters and interpolations read as `?`). */
const STATEMENTS: readonly RegExp[] = [
  /\bselect\b[\s\S]*\bfrom\b/i,
  /\bupdate\b[\s\S]*\bset\b/i,
  /\binsert\s+into\b/i,
  /\bdelete\s+from\b/i,
];

/** The calls that run SQL: `execute` on an EntityManager (`em`, `ctx.em`, a transaction's `tx`) or on a connection, and the query builders. */
const RUNNERS = /^(?:[\w.]*\bem|tx|[\w.]*\.getConnection\(\))\.execute$|\.(?:createQueryBuilder|getKnex|qb)$/;

/** The SQL statements and the calls that run SQL in one file's text, each with its line. */
function sqlIn(fileName: string, text: string): { line: number; what: string }[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: { line: number; what: string }[] = [];
  const at = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const visit = (node: ts.Node): void => {
    let literal: string | null = null;
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) literal = node.text;
    else if (ts.isTemplateExpression(node))
      literal = [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(' ? ');
    if (literal !== null && STATEMENTS.some((re) => re.test(literal)))
      found.push({ line: at(node), what: `SQL: ${literal.replace(/\s+/g, ' ').slice(0, 80)}` });
    if (ts.isCallExpression(node)) {
      const callee = node.expression.getText(source).replace(/\s+/g, '');
      if (RUNNERS.test(callee)) found.push({ line: at(node), what: `runs SQL: ${callee}(…)` });
    }
    // A template's parts are read once, with the template.
    if (!ts.isTemplateExpression(node)) ts.forEachChild(node, visit);
    else node.templateSpans.forEach((s) => visit(s.expression));
  };
  visit(source);
  return found;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('the detector of SQL in the interface', () => {
  it.each([
    ['const rows = await em.execute(`select id from worker where name = ?`, [name]);'],
    ["ctx.em.execute<{ n: number }[]>('select 1', [])"],
    ['await tx.execute(q, [])'],
    ['deps.orm.em\n  .getConnection()\n  .execute(q)'],
    ['const q = `SELECT count(*) FROM instance WHERE pool_id = ${id}`;'],
    ["const w = 'update worker set connected_at = null';"],
    ['const i = "Insert Into token (id) values (1)";'],
    ['const d = `delete from work_request_log where work_request_id = ?`;'],
    ['const sub = (t: string) => `select n from ${t}`;'],
    ['em.createQueryBuilder(WorkerSchema)'],
  ])('finds %j', (text) => {
    expect(sqlIn('example.ts', text).length).toBeGreaterThan(0);
  });

  it.each([
    ['execute: (args) => (args.rootValue as { execute: (a: unknown) => unknown }).execute(args) as never,'],
    ["description: 'Only the workers of this pool'"],
    ['// select id from worker: a comment is not a statement'],
    ["const label = 'Selected: the first ones from the list';"],
    ['const rows = await listWorkers(ctx.em, ctx.viewer, filter, page);'],
    ['html`<select name="pool">${options}</select>`'],
  ])('leaves %j', (text) => {
    expect(sqlIn('example.ts', text)).toEqual([]);
  });

  it('gives the line of each finding', () => {
    expect(sqlIn('example.ts', "a();\nconst q = 'select 1 from x';\nem.execute(q);").map((f) => f.line)).toEqual([
      2, 3,
    ]);
  });
});

describe('the interface layer', () => {
  const files = sourceFiles(INTERFACE);

  it('has files to check', () => {
    expect(files.length).toBeGreaterThan(50);
  });

  it('holds no SQL statement and runs none: they are named functions of the services and scheduler/storage/', () => {
    const found = files.flatMap((file) =>
      sqlIn(file, fs.readFileSync(file, 'utf8')).map((f) => `${file}:${f.line}: ${f.what}`),
    );
    expect(found).toEqual([]);
  });
});
