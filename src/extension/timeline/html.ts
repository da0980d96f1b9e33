import type * as vscode from 'vscode';
import { pageShell } from '../review/html';
import { FIRST_TIMELINE_ID, type TimelineModel } from './protocol';

/**
 * The timeline page, in the review panel's shell and under its rules (strict CSP, the
 * first model carried in an inert JSON data block the page parses with its schema).
 */
export function timelineHtml(webview: vscode.Webview, extensionUri: vscode.Uri, title: string, first?: TimelineModel): string {
  return pageShell(webview, extensionUri, { bundle: 'timeline', title, loading: 'Loading the timeline…', first: first && { id: FIRST_TIMELINE_ID, value: first } });
}
