/**
 * Boolean tag expressions of workspace task rules (docs/design.md: work requests): `and`, `or`, `not`, parentheses,
 * and tags as atoms, with `not` binding tighter than `and`, and `and` tighter than `or`.
 *
 * An atom is true when the set holds it under the match rule: the identical string, or, for
 * `NAME>=N`, a tag `NAME=V` with V >= N. The lowercase words `and`, `or` and `not` are always
 * operators, so a tag spelled exactly like one of them cannot be an atom.
 */
import { ProvidedTagIndex } from './match.js';
import { parseTag } from './syntax.js';

/** A parsed expression; a `tag` atom may carry `>=N` (a minimum) or `=N` (an exact valued tag). */
export type TagExpression =
  | { kind: 'tag'; tag: string }
  | { kind: 'not'; operand: TagExpression }
  | { kind: 'and' | 'or'; operands: TagExpression[] };

/** Where and why an expression does not parse; `position` is a 0-based offset into the source. */
export interface ExpressionError {
  message: string;
  position: number;
}

/** The result of {@link parseExpression}. */
export type ParseExpressionResult = { ok: true; expression: TagExpression } | { ok: false; error: ExpressionError };

/** Deepest nesting of parentheses and `not` accepted, so that hostile input cannot exhaust the stack. */
export const MAX_EXPRESSION_DEPTH = 100;

type Token = { kind: '(' | ')' | 'end'; position: number } | { kind: 'word'; text: string; position: number };

const OPERATORS: ReadonlySet<string> = new Set(['and', 'or', 'not']);

/** Words are split on whitespace and parentheses only, so a bad character is reported inside its tag. */
function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /\s+|[()]|[^\s()]+/g;
  for (const match of src.matchAll(pattern)) {
    const text = match[0];
    const position = match.index;
    if (text === '(' || text === ')') tokens.push({ kind: text, position });
    else if (!/^\s/.test(text)) tokens.push({ kind: 'word', text, position });
  }
  tokens.push({ kind: 'end', position: src.length });
  return tokens;
}

/** Unwinds the recursive descent to the single place that turns it into a result. */
class ParseFailure extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(message);
  }
}

function describe(token: Token): string {
  if (token.kind === 'end') return 'the end of the expression';
  return JSON.stringify(token.kind === 'word' ? token.text : token.kind);
}

class Parser {
  private next = 0;

  constructor(private readonly tokens: readonly Token[]) {}

  parseAll(): TagExpression {
    const expression = this.parseOr(0);
    const token = this.peek();
    if (token.kind === ')') throw new ParseFailure(`unbalanced ")" at position ${token.position}`, token.position);
    if (token.kind !== 'end') this.failAfterOperand(token, 'the end of the expression');
    return expression;
  }

  private peek(): Token {
    return this.tokens[this.next];
  }

  private isWord(token: Token, word: string): boolean {
    return token.kind === 'word' && token.text === word;
  }

  private failAfterOperand(token: Token, closer: string): never {
    throw new ParseFailure(
      `expected "and", "or" or ${closer} at position ${token.position}, got ${describe(token)}`,
      token.position,
    );
  }

  private parseOr(depth: number): TagExpression {
    const operands = [this.parseAnd(depth)];
    while (this.isWord(this.peek(), 'or')) {
      this.next += 1;
      operands.push(this.parseAnd(depth));
    }
    return operands.length === 1 ? operands[0] : { kind: 'or', operands };
  }

  private parseAnd(depth: number): TagExpression {
    const operands = [this.parseNot(depth)];
    while (this.isWord(this.peek(), 'and')) {
      this.next += 1;
      operands.push(this.parseNot(depth));
    }
    return operands.length === 1 ? operands[0] : { kind: 'and', operands };
  }

  private parseNot(depth: number): TagExpression {
    const token = this.peek();
    if (!this.isWord(token, 'not')) return this.parsePrimary(depth);
    this.checkDepth(depth, token);
    this.next += 1;
    return { kind: 'not', operand: this.parseNot(depth + 1) };
  }

  private parsePrimary(depth: number): TagExpression {
    const token = this.peek();
    if (token.kind === '(') {
      this.checkDepth(depth, token);
      this.next += 1;
      const inner = this.parseOr(depth + 1);
      const close = this.peek();
      if (close.kind === 'end') {
        throw new ParseFailure(`unbalanced "(" at position ${token.position}: missing ")"`, token.position);
      }
      if (close.kind !== ')') this.failAfterOperand(close, '")"');
      this.next += 1;
      return inner;
    }
    if (token.kind === 'word' && OPERATORS.has(token.text)) {
      throw new ParseFailure(
        `unexpected "${token.text}" at position ${token.position}: expected a tag or "("`,
        token.position,
      );
    }
    if (token.kind === 'word') {
      const parsed = parseTag(token.text, token.text.includes('>=') ? 'required' : 'provided');
      if (!parsed.ok) {
        throw new ParseFailure(`invalid tag at position ${token.position}: ${parsed.error.message}`, token.position);
      }
      this.next += 1;
      return { kind: 'tag', tag: token.text };
    }
    throw new ParseFailure(
      `expected a tag or "(" at position ${token.position}, got ${describe(token)}`,
      token.position,
    );
  }

  private checkDepth(depth: number, token: Token): void {
    if (depth >= MAX_EXPRESSION_DEPTH) {
      throw new ParseFailure(
        `expression nested too deeply at position ${token.position}: ` +
          `at most ${MAX_EXPRESSION_DEPTH} levels of "(" and "not"`,
        token.position,
      );
    }
  }
}

/** Parses an expression, or says where and why it does not parse. */
export function parseExpression(src: string): ParseExpressionResult {
  const tokens = tokenize(src);
  if (tokens.length === 1) return { ok: false, error: { message: 'empty expression', position: 0 } };
  try {
    return { ok: true, expression: new Parser(tokens).parseAll() };
  } catch (error) {
    if (!(error instanceof ParseFailure)) throw error;
    return { ok: false, error: { message: error.message, position: error.position } };
  }
}

function evaluate(expr: TagExpression, index: ProvidedTagIndex): boolean {
  switch (expr.kind) {
    case 'tag':
      return index.satisfies(expr.tag);
    case 'not':
      return !evaluate(expr.operand, index);
    case 'and':
      return expr.operands.every((operand) => evaluate(operand, index));
    case 'or':
      return expr.operands.some((operand) => evaluate(operand, index));
  }
}

/** Evaluates an expression over a set of tag strings (an empty `and` is true, an empty `or` false). */
export function evaluateExpression(expr: TagExpression, tags: Iterable<string> | ReadonlySet<string>): boolean {
  return evaluate(expr, new ProvidedTagIndex(tags));
}

/** Parenthesises an operand that binds looser than its parent, or that the parser would otherwise flatten into it. */
function formatOperand(operand: TagExpression, parent: 'and' | 'or' | 'not'): string {
  const text = formatExpression(operand);
  if (operand.kind === 'tag' || operand.kind === 'not') return text;
  if (parent === 'or' && operand.kind === 'and') return text;
  return `(${text})`;
}

/**
 * Writes an expression in canonical form (single spaces, only the parentheses the structure needs),
 * which parses back to the same tree; an `and` or `or` needs at least one operand.
 */
export function formatExpression(expr: TagExpression): string {
  switch (expr.kind) {
    case 'tag':
      return expr.tag;
    case 'not':
      return `not ${formatOperand(expr.operand, 'not')}`;
    case 'and':
    case 'or': {
      if (expr.operands.length === 0) throw new RangeError(`an empty "${expr.kind}" has no textual form`);
      if (expr.operands.length === 1) return formatExpression(expr.operands[0]);
      return expr.operands.map((operand) => formatOperand(operand, expr.kind)).join(` ${expr.kind} `);
    }
  }
}
