// The caller's TypeScript or JavaScript, as the body of an async function of (page, context,
// browser). esbuild's `transform` (loader ts) strips the types and lowers what this Node lacks;
// the result is evaluated in the runner's global scope. The same code compiles once: the last few
// compiled functions are kept by their source.
import { transform, type Message } from 'esbuild';

type CodeFunction = (page: unknown, context: unknown, browser: unknown) => Promise<unknown>;

/** The code does not compile; the message is esbuild's (or V8's), with the line in the caller's code. */
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
const TARGET = `node${process.versions.node}`;

function describe(m: Message, codeLines: number): string {
  const loc = m.location;
  if (loc === null) return m.text;
  const line = loc.line - PREFIX_LINES;
  if (line < 1 || line > codeLines) return `${m.text} (at the end of the code: is a bracket or brace left open?)`;
  return `${m.text} (line ${line}, column ${loc.column + 1}: ${loc.lineText.trim().slice(0, 200)})`;
}

export async function compile(code: string): Promise<CodeFunction> {
  const hit = cache.get(code);
  if (hit !== undefined) {
    cache.delete(code);
    cache.set(code, hit);
    return hit;
  }
  let js: string;
  try {
    js = (await transform(PREFIX + code + SUFFIX, { loader: 'ts', target: TARGET, sourcefile: 'code.ts', logLevel: 'silent' })).code;
  } catch (err) {
    const errors = (err as { errors?: Message[] }).errors;
    if (errors === undefined || errors.length === 0) throw new CompileError(`the code does not compile: ${(err as Error).message}`);
    const lines = code.split('\n').length;
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more error${errors.length > 2 ? 's' : ''})` : '';
    throw new CompileError(`SyntaxError: ${describe(errors[0] as Message, lines)}${more}`);
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

/** Starts esbuild's service before the first execution needs it. */
export async function warmUp(): Promise<void> {
  await transform('let a: number = 1', { loader: 'ts' });
}
