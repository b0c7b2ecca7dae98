// The error of a bad setting: it names the setting; main logs it in one line and exits 2.
export class ConfigError extends Error {
  constructor(
    readonly setting: string,
    why: string,
  ) {
    super(`${setting}: ${why}`);
    this.name = 'ConfigError';
  }
}
