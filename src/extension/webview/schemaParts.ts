/**
 * The bounded building blocks the webview protocols are written in (zod/mini), so
 * each schema reads as a limit: `str(1, 4096)`, `int(0, 20_000)`, `list(x, 1_000)`.
 * No `vscode` import: pages bundle it.
 */
import * as z from 'zod/mini';

/** A string of `min`..`max` characters. */
export const str = (min: number, max: number) => z.string().check(z.minLength(min), z.maxLength(max));
/** A string of at most `max` characters. */
export const Text = (max: number) => z.string().check(z.maxLength(max));
/** A safe integer ≥ `min` (and ≤ `max` when given). */
export const int = (min: number, max?: number) => (max === undefined ? z.int().check(z.gte(min)) : z.int().check(z.gte(min), z.lte(max)));
/** A number in `min`..`max`. */
export const num = (min: number, max: number) => z.number().check(z.gte(min), z.lte(max));
/** An array of at most `max` items. */
export const list = <T extends z.ZodMiniType>(item: T, max: number) => z.array(item).check(z.maxLength(max));
