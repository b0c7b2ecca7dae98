// The caller's TypeScript or JavaScript, as the body of an async function of (page, context,
// browser). Node's own type stripping (`module.stripTypeScriptTypes`, strip mode) blanks the types
// out in place: every line and column stays where the caller wrote it, so V8's stack frames and
// the syntax errors below point into the caller's code. Strip mode takes what Node takes in a .ts
// file: TypeScript that only needs erasing; enums, namespaces, parameter properties and `<T>x`
// casts are refused with Node's message. The result is evaluated in the runner's global scope.
// The same code compiles once: the last few compiled functions are kept by their source.
import { stripTypeScriptTypes } from 'node:module';

type CodeFunction = (page: unknown, context: unknown, browser: unknown) => Promise<unknown>;

/** The code does not compile; the message is Node's (or V8's), with the line in the caller's code. */
export class CompileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CompileError';
  }
}

const CACHE_ENTRIES = 32;
const cache = new Map<string, CodeFunction>();
const PREFIX = '(async (page, context, browser) => {\n';
const SUFFIX = '\n})';
/** The lines the wrapper adds before the caller's first line. */
const PREFIX_LINES = 1;
/** Node's parse errors carry their place only in the stack's head: `:<line>\n<source lines, the last the line's>\n<spaces>^`. */
const PLACE = /^[^\n]*:(\d+)\n(?:[^\n]*\n)*?([^\n]*)\n( *)\^/;

function where(err: Error, codeLines: number): string {
  const m = PLACE.exec(err.stack ?? '');
  if (m === null) return '';
  const line = Number(m[1]) - PREFIX_LINES;
  if (line < 1 || line > codeLines) return ' (at the end of the code: is a bracket or brace left open?)';
  return ` (line ${line}, column ${(m[3] as string).length + 1}: ${(m[2] as string).trim().slice(0, 200)})`;
}

export function compile(code: string): CodeFunction {
  const hit = cache.get(code);
  if (hit !== undefined) {
    cache.delete(code);
    cache.set(code, hit);
    return hit;
  }
  let js: string;
  try {
    js = stripTypeScriptTypes(PREFIX + code + SUFFIX, { mode: 'strip' });
  } catch (err) {
    const e = err as Error & { code?: string };
    if (e.code !== 'ERR_INVALID_TYPESCRIPT_SYNTAX' && e.code !== 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX') throw new CompileError(`the code does not compile: ${e.message}`);
    throw new CompileError(`SyntaxError: ${e.message}${where(e, code.split('\n').length)}`);
  }
  let fn: CodeFunction;
  try {
    // Indirect eval: the global scope (not this module's), and import() of node: modules works.
    fn = (0, eval)(js) as CodeFunction;
  } catch (err) {
    throw new CompileError(`${(err as Error).name}: ${(err as Error).message}`);
  }
  if (typeof fn !== 'function') throw new CompileError('the code does not compile to a function body (does it close the function early?)');
  cache.set(code, fn);
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value as string);
  return fn;
}
