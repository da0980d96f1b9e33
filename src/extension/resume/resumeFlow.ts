import * as vscode from 'vscode';
import type { EngineApi } from '../../core/engine/api';
import type { ResumeContext } from '../../core/engine/resumeContext';
import type { Task } from '../../core/model/schema';
import { settings } from '../settings';
import { taskDetail } from '../storeReads';
import type { EngineHost } from '../engineHost';
import type { WorkspaceOperations } from '../workspaceOperations';
import { installedAgentClis } from './agentClis';
import { CHAT_COMMAND, deliveryLabel, offeredDeliveries, type Delivery } from './deliveries';
import { describeStop, driverName } from './words';
import { handOver } from './handOver';
import { displayText } from '../../core/model/displayText';

/**
 * Resume Task as a hand-off: everything is asked first (side effects in doubt,
 * drift, how the context reaches the next agent), and the task changes only once
 * the person has confirmed a delivery. Escape at any prompt leaves the task, its
 * attempt and its events exactly as they were.
 */
export interface ResumeFlowDeps {
  host: EngineHost;
  /** The window's one queue of workspace operations (a drift rollback waits its turn there). */
  operations: WorkspaceOperations;
  log: vscode.LogOutputChannel;
  owner: () => { id: string; pid: number };
  folder: () => vscode.WorkspaceFolder | undefined;
}

/** What can deliver here (see offeredDeliveries): the editor's commands, its AI setting, its chat models, the CLIs on PATH. */
export async function availableDeliveries(task: Task): Promise<Delivery[]> {
  const commands = await vscode.commands.getCommands(true);
  const aiFeaturesOff = vscode.workspace.getConfiguration('chat').get<boolean>('disableAIFeatures', false);
  const chatModels = commands.includes(CHAT_COMMAND) && !aiFeaturesOff ? await countChatModels() : 0;
  return offeredDeliveries({ commands, aiFeaturesOff, chatModels, clis: installedAgentClis(task.agent) });
}

/** Chat models on offer, given up on after a second (the picker must not wait on a slow provider: no chat is offered then). */
async function countChatModels(): Promise<number> {
  const timeout = new Promise<number>((resolve) => setTimeout(() => resolve(0), 1_000));
  return Promise.race([vscode.lm.selectChatModels().then((m) => m.length, () => 0), timeout]);
}

type DriftChoice = { rollBack: false } | { rollBack: true; since: string; paths: string[] };

export class ResumeFlow {
  /** The deliveries the last picker offered, by label (what the integration tests check; nothing reads it otherwise). */
  lastOffered: readonly string[] = [];
  constructor(private readonly d: ResumeFlowDeps) {}

  /** Runs the hand-off for `task`; answers the resume context once delivered, undefined when the person stepped back. */
  async run(task: Task): Promise<ResumeContext | undefined> {
    const engine = await this.d.host.api();
    if (!(await this.confirmInDoubt(task))) return undefined;
    const drift = await this.askDrift(engine, task);
    if (!drift) return undefined;
    const delivery = await this.pickDelivery(task);
    if (!delivery) return undefined;
    // Confirmed: now, and only now, the workspace and the task change.
    if (drift.rollBack) {
      await this.d.operations.run('rolling back the changes…', () => engine.rollback({ taskId: task.id, checkpointId: drift.since, paths: drift.paths, reason: 'drift rolled back before resuming' }));
    }
    const ctx = await handOver(engine, task.id, delivery, this.d.owner());
    await this.deliver(ctx, delivery);
    return ctx;
  }

  private async confirmInDoubt(task: Task): Promise<boolean> {
    const inDoubt = (await taskDetail(this.d.host, task.id)).sideEffects.filter((e) => e.status === 'in_doubt' || e.status === 'intent');
    if (!inDoubt.length) return true;
    const list = inDoubt.map((e) => `• ${e.description} (${e.kind})`).join('\n');
    const go = await vscode.window.showWarningMessage(
      `${inDoubt.length} side effect${inDoubt.length > 1 ? 's are' : ' is'} in doubt for “${task.title}”`,
      { modal: true, detail: `They were begun but no outcome was recorded:\n${list}\n\nThe resume context tells the agent to verify them before repeating them.` },
      'Continue',
    );
    return go === 'Continue';
  }

  /** Files changed since the task's last checkpoint by someone else: keep them (the agent is told) or roll them back once the hand-off is confirmed. */
  private async askDrift(engine: EngineApi, task: Task): Promise<DriftChoice | undefined> {
    const drift = await vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: 'Waypoint: checking the workspace' }, () => engine.drift(task.id));
    if (!drift.files.length || !drift.since) return { rollBack: false };
    const list = drift.files.slice(0, 8).map((f) => `${f.status}: ${f.path}`);
    const keep = `Keep ${drift.files.length === 1 ? 'This Change' : 'These Changes'}`;
    const roll = 'Roll Them Back';
    const choice = await vscode.window.showWarningMessage(
      `${drift.files.length} file${drift.files.length === 1 ? ' has' : 's have'} changed since “${task.title}” last checkpointed`,
      {
        modal: true,
        detail: `${list.join('\n')}${drift.files.length > 8 ? `\n… and ${drift.files.length - 8} more` : ''}\n\nKeep them (the agent is told about them) or roll them back to the checkpoint (undoable). Nothing changes until you choose how to hand the task over.`,
      },
      keep,
      roll,
    );
    if (!choice) return undefined;
    return choice === roll ? { rollBack: true, since: drift.since, paths: drift.files.map((f) => f.path) } : { rollBack: false };
  }

  /** The configured delivery when it works here; otherwise the picker (title, short items, the state in words above them). */
  private async pickDelivery(task: Task): Promise<Delivery | undefined> {
    const options = await availableDeliveries(task);
    const configured = settings().resumeDelivery;
    const preset = options.find((o) => (configured === 'terminal' ? o.how === 'cli' : o.how === configured));
    this.lastOffered = options.map(deliveryLabel);
    if (preset) return preset;
    if (configured !== 'ask') this.d.log.info(`[resume] the configured delivery '${configured}' is not available here; asking`);
    // The state goes in the title, a line of its own above the choices: a separator's label would be drawn
    // beside the first item, where it reads as that item's description.
    const stop = describeStop(task, Date.now()) ?? `${driverName(task)} is not running it`;
    type Item = vscode.QuickPickItem & { delivery?: Delivery };
    const items = options.map((o): Item => {
      if (o.how === 'chat') return { label: `$(comment-discussion) ${deliveryLabel(o)}`, detail: 'Start a chat that continues the task from the resume prompt', delivery: o };
      if (o.how === 'cli') return { label: `$(terminal) ${deliveryLabel(o)}`, description: o.path, detail: `Run ${o.cli.bin} in a new terminal with the resume prompt as its first message`, delivery: o };
      return { label: `$(copy) ${deliveryLabel(o)}`, detail: 'Paste the prompt into any agent; the task resumes when it first reports', delivery: o };
    });
    const pick = await vscode.window.showQuickPick(items, {
      title: `Resume “${displayText(task.title)}” · ${stop}`,
      placeHolder: 'How should the next agent get the context?',
      matchOnDetail: true,
    });
    return pick?.delivery;
  }

  private async deliver(ctx: ResumeContext, delivery: Delivery): Promise<void> {
    if (delivery.how === 'chat') {
      try {
        // Sent, not left in the input: choosing "Open in Chat" is the confirmation, and the chat's agent continues from it.
        await vscode.commands.executeCommand(CHAT_COMMAND, { query: ctx.markdown });
        this.d.log.info(`[resume] started a chat with the resume prompt of ${ctx.task.id}`);
        return;
      } catch (e) {
        this.d.log.warn(`[resume] the chat did not open (${(e as Error).message}); copying the prompt instead`);
      }
    } else if (delivery.how === 'cli') {
      // The agent is the terminal's process and the prompt one argv element: no shell quoting of a multi-line prompt.
      const term = vscode.window.createTerminal({
        name: `${delivery.cli.name}: ${ctx.task.title}`,
        shellPath: delivery.path,
        shellArgs: delivery.cli.args(ctx.markdown),
        cwd: this.d.folder()?.uri,
        iconPath: new vscode.ThemeIcon('debug-continue'),
      });
      term.show();
      this.d.log.info(`[resume] started ${delivery.path} for ${ctx.task.id} with the resume prompt`);
      return;
    }
    await vscode.env.clipboard.writeText(ctx.markdown);
    // Copying resumed nothing (see handOver): say so, so an unchanged "interrupted" in the tree is expected.
    void vscode.window.showInformationMessage(`Waypoint: the resume prompt of “${displayText(ctx.task.title)}” is copied; paste it into your agent. The task stays ${ctx.task.state} until the agent picks it up.`);
  }
}
