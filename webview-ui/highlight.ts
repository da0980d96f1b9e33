/**
 * The review page's syntax highlighter: highlight.js's core with its common
 * languages, in a bundle of its own that the page loads only after it has drawn
 * its first content (see reviewHighlight.ts), so colouring never delays it.
 */
import hljs from 'highlight.js/lib/common';
import { htmlToLines, languageFor, type Highlighter } from './highlightLines';

declare global {
  interface Window {
    waypointHighlighter?: Highlighter;
  }
}

window.waypointHighlighter = {
  language: (path) => languageFor(path, (name) => hljs.getLanguage(name) !== undefined),
  lines: (language, text) => htmlToLines(hljs.highlight(text, { language, ignoreIllegals: true }).value),
};
window.dispatchEvent(new Event('waypoint-highlighter'));
