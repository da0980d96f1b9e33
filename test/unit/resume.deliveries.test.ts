import assert from 'node:assert/strict';
import { AGENT_CLIS } from '../../src/extension/resume/agentClis';
import { CHAT_COMMAND, deliveryLabel, offeredDeliveries } from '../../src/extension/resume/deliveries';

/** Resume offers only the hand-offs that work here (issue 18: "Open in Chat" did nothing with no chat). */
describe('resume deliveries: only what works in this editor, on this machine', () => {
  const claude = { cli: AGENT_CLIS.find((c) => c.bin === 'claude')!, path: '/usr/local/bin/claude' };
  const env = { commands: [CHAT_COMMAND, 'other'], aiFeaturesOff: false, chatModels: 2, clis: [claude] };

  it('offers the chat, each CLI found and the clipboard, in that order', () => {
    assert.deepEqual(offeredDeliveries(env).map(deliveryLabel), ['Open in Chat', 'Start Claude Code in a Terminal', 'Copy to Clipboard']);
  });

  it('no chat without its command (code-server), with AI features off, or with no model to answer', () => {
    for (const e of [{ ...env, commands: ['other'] }, { ...env, aiFeaturesOff: true }, { ...env, chatModels: 0 }]) {
      assert.ok(!offeredDeliveries(e).some((d) => d.how === 'chat'), JSON.stringify(e));
    }
  });

  it('always the clipboard, even with nothing else', () => {
    assert.deepEqual(offeredDeliveries({ commands: [], aiFeaturesOff: true, chatModels: 0, clis: [] }), [{ how: 'clipboard' }]);
  });

  it('each CLI gets the prompt as its documented interactive first-prompt argument, as one argv element', () => {
    const prompt = '# Resume task: x\n\n- line "quoted" $HOME `tick`';
    const argv = Object.fromEntries(AGENT_CLIS.map((c) => [c.bin, c.args(prompt)]));
    assert.deepEqual(argv, { claude: [prompt], codex: [prompt], gemini: ['-i', prompt], copilot: ['-i', prompt], qwen: ['-i', prompt], opencode: ['--prompt', prompt] });
  });
});
