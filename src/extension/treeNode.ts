import * as vscode from 'vscode';
import { displayText } from '../core/model/displayText';

/**
 * A tooltip with recorded text (titles, goals, errors) escaped: no control character
 * or bidi override reaches the hover. appendText escapes Markdown, not these.
 */
export function safeTooltip(t: string | vscode.MarkdownString): string | vscode.MarkdownString {
  if (typeof t === 'string') return displayText(t, { multiline: true });
  const safe = new vscode.MarkdownString(displayText(t.value, { multiline: true }), t.supportThemeIcons);
  safe.supportHtml = t.supportHtml;
  safe.isTrusted = t.isTrusted;
  if (t.baseUri) safe.baseUri = t.baseUri;
  return safe;
}

/**
 * What one row of a tree view shows, declared once by each kind of node: the one
 * place a row's id, label, description, tooltip, icon, context value and click
 * command are set, so every node builds its TreeItem the same way (stable id,
 * parent for `reveal`, an accessible label, no field forgotten on one kind).
 */
export interface TreeRow {
  label: string;
  description?: string;
  /** Plain text or Markdown; omit to fill it lazily in `resolveTreeItem` (on hover). */
  tooltip?: string | vscode.MarkdownString;
  icon: vscode.ThemeIcon;
  /** Composite, matched by regex in package.json `when` clauses (`task:interrupted:resumable:…`). */
  contextValue: string;
  /** Run when the row is clicked (none: clicking only selects). */
  command?: vscode.Command;
  /** Defaults to not expandable. */
  collapsible?: vscode.TreeItemCollapsibleState;
  /** What a screen reader says for the row; defaults to the label and the description. */
  accessibleLabel?: string;
}

export abstract class WaypointTreeNode {
  /** Which kind of node (narrows the TreeNode union without instanceof). */
  abstract readonly kind: string;
  /** Stable across refreshes, so VS Code keeps selection and expansion. */
  abstract readonly id: string;
  /** For `getParent` (needed by `reveal`); undefined at the root. */
  /** Its parent row: another node of this view, or a capture node (captureNodes.ts: commands, history). */
  abstract readonly parent: WaypointTreeNode | { readonly id: string } | undefined;
  /** The row, from what the node carries: rendering queries nothing. */
  protected abstract row(): TreeRow;

  toTreeItem(): vscode.TreeItem {
    const r = this.row();
    // Labels and descriptions hold recorded text: one line each, escaped (see displayText).
    const label = displayText(r.label);
    const description = r.description === undefined ? undefined : displayText(r.description);
    const item = new vscode.TreeItem(label, r.collapsible ?? vscode.TreeItemCollapsibleState.None);
    item.id = this.id;
    item.iconPath = r.icon;
    item.contextValue = r.contextValue;
    if (description !== undefined) item.description = description;
    if (r.tooltip !== undefined) item.tooltip = safeTooltip(r.tooltip);
    if (r.command) item.command = r.command;
    item.accessibilityInformation = { label: r.accessibleLabel !== undefined ? displayText(r.accessibleLabel) : description ? `${label}, ${description}` : label };
    return item;
  }
}
