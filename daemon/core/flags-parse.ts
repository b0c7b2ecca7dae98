// Splits BROWSERD_CHROMIUM_FLAGS the way a shell would split a simple word list:
// whitespace separates flags; single or double quotes group (and are removed), so
// --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" stays one flag.
// No variables, globs or escapes beyond \" inside double quotes.

export function splitFlags(raw: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i] as string;
    if (quote !== null) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && raw[i + 1] === '"') cur += raw[++i];
      else cur += c;
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (quote !== null) throw new Error(`unterminated ${quote} quote`);
  if (inWord) out.push(cur);
  return out;
}
