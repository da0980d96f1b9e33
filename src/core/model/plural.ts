/**
 * `1 file`, `3 files`, `0 files`: the one plural helper for counts a person reads (the
 * extension, the CLI). In core because both use it and the CLI may not import the extension.
 */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
