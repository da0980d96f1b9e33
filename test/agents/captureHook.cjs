#!/usr/bin/env node
// A hook for the real-agent suite: appends each payload the agent sends (one JSON line, with the
// event's name) to the file named by WAYPOINT_AGENT_CAPTURE, and plays the person when told to:
// on a PreToolUse (Gemini CLI: BeforeTool) of the tool named by WAYPOINT_PERSON_TOOL it waits
// until Waypoint has opened the call (its session file names the call's id, or, for an agent
// that gives none, holds an open call), then writes WAYPOINT_PERSON_FILE. WAYPOINT_CAPTURE_STDOUT
// is printed as the hook's answer (Gemini CLI parses it).
'use strict';
const fs = require('fs');
const path = require('path');
const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', () => {
  const raw = Buffer.concat(chunks).toString('utf8');
  if (process.env.WAYPOINT_CAPTURE_STDOUT) process.stdout.write(process.env.WAYPOINT_CAPTURE_STDOUT + '\n');
  const out = process.env.WAYPOINT_AGENT_CAPTURE;
  if (out) fs.appendFileSync(out, raw.replace(/\n/g, ' ') + '\n');
  let p = {};
  try {
    p = JSON.parse(raw);
  } catch {
    return;
  }
  const tool = process.env.WAYPOINT_PERSON_TOOL;
  const file = process.env.WAYPOINT_PERSON_FILE;
  // Cline names neither the event nor the tool at the top: its PreToolUse carries `preToolUse` and `tool_call`.
  const event = p.hook_event_name || (p.preToolUse ? 'PreToolUse' : undefined);
  const toolName = p.tool_name || (p.preToolUse && p.preToolUse.toolName);
  const callId = p.tool_use_id || (p.tool_call && p.tool_call.id);
  if (!tool || !file || !['PreToolUse', 'BeforeTool'].includes(event) || toolName !== tool || fs.existsSync(file)) return;
  const hooksDir = path.join(process.env.WAYPOINT_PERSON_WORKSPACE || p.cwd, '.waypoint', 'hooks');
  const until = Date.now() + 20000;
  const opened = () => {
    try {
      return fs.readdirSync(hooksDir).some((f) => {
        const text = fs.readFileSync(path.join(hooksDir, f), 'utf8');
        return callId ? text.includes(JSON.stringify(callId) + ':') : /"open":\{"/.test(text);
      });
    } catch {
      return false;
    }
  };
  while (!opened() && Date.now() < until) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  fs.writeFileSync(file, 'the person wrote this while the agent edited\n');
});
