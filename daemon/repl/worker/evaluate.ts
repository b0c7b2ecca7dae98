// One REPL cell: JavaScript whose top-level bindings outlive it. The cell is parsed (acorn, as a
// script with top-level await) and rewritten so that it can run as the body of an async function
// (await anywhere) while what it declares at its top level lands on the global object, which
// every later cell sees:
//   const a = 1, {b} = o;   →  a = 1; ({b} = o);       (const and let become plain globals: a cell
//   let c;                  →  c = undefined;            may be run again without "already declared")
//   class K {}              →  K = class K {};
//   function f() {}         →  kept (hoisted in the cell), and globalThis.f = f at the cell's start
// and the value of its last statement, when that is an expression, is the cell's value (as in
// Node's REPL). Everything else is left as written, at the same lines and columns.
import { parse, type Pattern, type Program, type Statement, type ModuleDeclaration } from 'acorn';
import vm from 'node:vm';

/** A cell that cannot be parsed: the parser's message with its line and column. */
export class CellSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SyntaxError';
  }
}

function namesOf(p: Pattern, into: string[]): string[] {
  switch (p.type) {
    case 'Identifier':
      into.push(p.name);
      break;
    case 'ObjectPattern':
      for (const prop of p.properties) namesOf(prop.type === 'RestElement' ? prop.argument : prop.value, into);
      break;
    case 'ArrayPattern':
      for (const el of p.elements) if (el !== null) namesOf(el, into);
      break;
    case 'RestElement':
      namesOf(p.argument, into);
      break;
    case 'AssignmentPattern':
      namesOf(p.left, into);
      break;
    default:
      break;
  }
  return into;
}

interface Edit {
  start: number;
  end: number;
  text: string;
}

/** The cell rewritten as the body of an async function (see the head of this file). */
export function rewriteCell(code: string): string {
  let program: Program;
  try {
    program = parse(code, { ecmaVersion: 'latest', sourceType: 'script', allowAwaitOutsideFunction: true, allowReturnOutsideFunction: true });
  } catch (err) {
    const e = err as SyntaxError & { loc?: { line: number; column: number } };
    throw new CellSyntaxError(e.message);
  }
  const edits: Edit[] = [];
  const functions: string[] = [];
  const body: (Statement | ModuleDeclaration)[] = program.body;
  body.forEach((st, i) => {
    const last = i === body.length - 1;
    if (st.type === 'VariableDeclaration') {
      const parts = st.declarations.map((d) => {
        const target = code.slice(d.id.start, d.id.end);
        // `var x;` keeps what x held (making it a global when it is new); `let x;` resets it.
        if (d.init === null || d.init === undefined) {
          return st.kind === 'var' ? namesOf(d.id, []).map((n) => `if (!(${JSON.stringify(n)} in globalThis)) globalThis[${JSON.stringify(n)}] = undefined`).join('; ') : `${target} = undefined`;
        }
        const value = code.slice(d.init.start, d.init.end);
        // A destructuring assignment needs parentheses (else `{` starts a block).
        return d.id.type === 'Identifier' ? `${target} = ${value}` : `(${target} = ${value})`;
      });
      edits.push({ start: st.start, end: st.end, text: `${parts.join('; ')};` });
    } else if (st.type === 'ClassDeclaration' && st.id !== null) {
      edits.push({ start: st.start, end: st.end, text: `${st.id.name} = ${code.slice(st.start, st.end)};` });
    } else if (st.type === 'FunctionDeclaration' && st.id !== null) {
      functions.push(st.id.name);
    } else if (last && st.type === 'ExpressionStatement') {
      edits.push({ start: st.start, end: st.end, text: `return (${code.slice(st.expression.start, st.expression.end)});` });
    }
  });
  let out = code;
  // Later edits first: the earlier offsets stay right.
  for (const e of edits.sort((a, b) => b.start - a.start)) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  const prelude = functions.map((f) => `globalThis[${JSON.stringify(f)}] = ${f}; `).join('');
  // On the cell's first line: lines and columns stay the caller's (but the first line's columns).
  return `(async () => { ${prelude}${out}\n})()`;
}

/** Runs a cell in the worker's global scope (sloppy mode: an undeclared assignment makes a global); resolves with its value. */
export function runCell(code: string): Promise<unknown> {
  const script = new vm.Script(rewriteCell(code), {
    filename: 'cell',
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  return script.runInThisContext() as Promise<unknown>;
}
