import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { OPENCODE_PLUGIN_REL } from '../../src/mcp/connectHooks';

/** The hooks an opencode plugin returns, by name. */
export type PluginHooks = Record<string, (...args: any[]) => Promise<void> | void>;

let loads = 0;
/**
 * The plugin `waypoint connect opencode` wrote into `ws`, run as opencode runs it: its module
 * (copied beside it as .mjs, Node's name for an ES module) called with the project folder.
 */
export async function loadOpencodePlugin(ws: string, directory = ws): Promise<PluginHooks> {
  const file = path.join(ws, ...OPENCODE_PLUGIN_REL.split('/'));
  const copy = file.replace(/\.js$/, `.node${++loads}.mjs`);
  fs.copyFileSync(file, copy);
  try {
    const mod = (await import(pathToFileURL(copy).href)) as { WaypointPlugin: (ctx: { directory: string }) => Promise<PluginHooks> };
    // Its own place is all the plugin reads from its file: loaded, the copy can go.
    return await mod.WaypointPlugin({ directory });
  } finally {
    fs.rmSync(copy, { force: true });
  }
}

/** One recorded payload (`{hook, input, output}` or `{hook: "event", event}`) handed to the plugin's hook of that name. */
export async function callPlugin(hooks: PluginHooks, p: Record<string, any>): Promise<void> {
  if (p.hook === 'event') await hooks.event({ event: p.event });
  else if (hooks[p.hook]) await hooks[p.hook](p.input, p.output);
}
