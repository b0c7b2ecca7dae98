// The report: the machine the run was on, the table of medians and ratios (markdown, padded so it
// reads in a terminal too), and the notes of each row.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { CHROMIUM, overhead, type Row, type Unit } from './lib.js';

export interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  node: string;
  chromium: string;
  date: string;
  load: string;
  chromiumProcesses: number;
}

function chromiumVersion(): string {
  try {
    return execFileSync(CHROMIUM, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim();
  } catch {
    return `unknown (${CHROMIUM} --version failed)`;
  }
}

/** Processes whose command name is chromium: other work on the machine that makes figures noisy. */
export function countChromiumProcesses(): number {
  let n = 0;
  for (const name of os.platform() === 'linux' ? readdirNumeric() : []) {
    try {
      if (/^chrom/.test(readFileSync(`/proc/${name}/comm`, 'utf8'))) n++;
    } catch {
      // gone
    }
  }
  return n;
}

function readdirNumeric(): string[] {
  return readdirSync('/proc').filter((n) => /^\d+$/.test(n));
}

export function describeMachine(): Machine {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGiB: os.totalmem() / 1024 ** 3,
    kernel: `${os.type()} ${os.release()} ${os.machine()}`,
    node: process.version,
    chromium: chromiumVersion(),
    date: new Date().toISOString(),
    load: os.loadavg().map((l) => l.toFixed(2)).join(' '),
    chromiumProcesses: countChromiumProcesses(),
  };
}

function fmt(v: number | null, unit: Unit): string {
  if (v === null || !Number.isFinite(v)) return '–';
  const digits = unit === 'MiB' ? 1 : unit === 'req/s' ? 0 : Math.abs(v) < 10 ? 2 : Math.abs(v) < 100 ? 1 : 0;
  return `${v.toFixed(digits)} ${unit}`;
}

function fmtOverhead(r: Row): string {
  const o = overhead(r);
  if (o === null) return '–';
  const pct = o * 100;
  return `${pct >= 0 ? '+' : '−'}${Math.abs(pct).toFixed(Math.abs(pct) < 10 ? 1 : 0)}%`;
}

function fmtRatio(r: Row): string {
  if (r.browserd === null || r.peer === null || r.peer === 0) return '–';
  const ratio = r.browserd / r.peer;
  return `${ratio >= 0.01 ? ratio.toFixed(2) : ratio.toPrecision(2)}×`; // 0.0031×, not 0.00×
}

export function table(rows: Row[]): string {
  const head = ['benchmark', 'browserd', 'peer', 'browserd/peer', 'overhead'];
  const body = rows.map((r) =>
    r.skipped !== undefined ? [r.name, r.skipped, '', '', ''] : [r.name, fmt(r.browserd, r.unit), fmt(r.peer, r.unit), fmtRatio(r), fmtOverhead(r)],
  );
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join(' | ')} |`;
  const sep = `| ${widths.map((w, i) => (i === 0 ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`;
  return [line(head), sep, ...body.map(line)].join('\n');
}

export function notes(rows: Row[]): string {
  return rows
    .filter((r) => r.skipped === undefined)
    .map((r) => `- **${r.name}** — peer: ${r.peerName}.${r.note ? ` ${r.note.charAt(0).toUpperCase()}${r.note.slice(1)}.` : ''}`)
    .join('\n');
}

/**
 * The report of a run; `analysis` (bench/ANALYSIS.md, written by hand: where the time goes, from
 * profiles, and why a row misses its target) is appended as it is, when present.
 */
export function markdown(rows: Row[], m: Machine, ran: string[], seconds: number, analysisFile?: string): string {
  const analysis = analysisFile !== undefined && existsSync(analysisFile) ? readFileSync(analysisFile, 'utf8').trimEnd() : null;
  return [
    '# browserd benchmarks: the last run',
    '',
    'Written by `npm run bench` (`bash .ci/setup --bench && npm run bench`); do not edit by hand (the last',
    'section, the analysis, comes from bench/ANALYSIS.md).',
    'Every figure of browserd is set against its peer — the same work done the most direct way',
    '(by hand, a bare server, the standard tool) — measured in the same run on the same machine.',
    '`overhead` is browserd\'s extra cost per unit of work: for times and memory browserd/peer − 1,',
    'for throughput peer/browserd − 1 (so +100% means half the throughput). A report, not a pass/fail test.',
    '',
    '## Machine',
    '',
    `- CPU: ${m.cpu}, ${m.cores} cores`,
    `- memory: ${m.memoryGiB.toFixed(1)} GiB`,
    `- kernel: ${m.kernel}`,
    `- node: ${m.node}`,
    `- Chromium: ${m.chromium}`,
    `- date: ${m.date}`,
    `- load average at start: ${m.load}; Chromium processes running at start: ${m.chromiumProcesses}`,
    `- benchmarks: ${ran.join(', ')}; the run took ${Math.round(seconds)} s`,
    '',
    '## Results',
    '',
    table(rows),
    '',
    '## What each row measures',
    '',
    notes(rows),
    '',
    ...(analysis === null ? [] : [analysis, '']),
  ].join('\n');
}
