// An opencode plugin for the real-agent suite (copied into the fresh home's
// ~/.config/opencode/plugins/, which opencode loads before the project's plugins, so each of
// its hooks runs before Waypoint's): appends every hook call to the file named by
// WAYPOINT_AGENT_CAPTURE as one JSON line in the shape Waypoint's plugin hands to
// `waypoint hook opencode` ({hook, directory, input, output}; an event as
// {hook: "event", directory, event}), and plays the person when told to: in the
// tool.execute.after of the tool named by WAYPOINT_PERSON_TOOL (the tool has run, Waypoint
// has not yet closed the call) it writes WAYPOINT_PERSON_FILE.
// Events that come by the dozen (message and status updates) are kept once per type, and
// message.part.updated also whenever a tool part ends in state `error`.
import fs from "node:fs";

const out = process.env.WAYPOINT_AGENT_CAPTURE;
const log = (p) => {
  if (out) fs.appendFileSync(out, JSON.stringify(p) + "\n");
};
const NOISY = new Set(["message.part.updated", "message.part.delta", "message.updated", "session.status", "session.diff", "session.updated", "plugin.added", "catalog.updated"]);
const seen = new Set();

export const WaypointSuiteCapture = async ({ directory }) => {
  const hooks = {};
  for (const hook of ["chat.message", "permission.ask", "command.execute.before", "tool.execute.before", "shell.env", "experimental.text.complete"]) {
    hooks[hook] = async (input, output) => log({ hook, directory, input, output });
  }
  hooks["tool.execute.after"] = async (input, output) => {
    log({ hook: "tool.execute.after", directory, input, output });
    const file = process.env.WAYPOINT_PERSON_FILE;
    if (input.tool === process.env.WAYPOINT_PERSON_TOOL && file && !fs.existsSync(file)) fs.writeFileSync(file, "the person wrote this while the agent edited\n");
  };
  hooks.event = async ({ event }) => {
    const failedTool = event.type === "message.part.updated" && event.properties?.part?.type === "tool" && event.properties.part.state?.status === "error";
    if (NOISY.has(event.type) && seen.has(event.type) && !failedTool) return;
    seen.add(event.type);
    log({ hook: "event", directory, event });
  };
  return hooks;
};
