// 4. stdin: written once the processes module has landed.
import type { Row } from './lib.js';

export async function benchStdin(): Promise<Row[]> {
  return [];
}
