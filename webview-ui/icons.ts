/**
 * The few icons the review page draws, as inline SVG in the style of VS Code's
 * codicons (16 × 16, `currentColor`, so every theme — high contrast included —
 * colours them). The codicon font is not a dependency of this extension and the
 * page's CSP loads nothing else, so the shapes live here. Icons are decorative:
 * the button or badge next to them carries the accessible name.
 */
const PATHS = {
  check: 'M3 8.5l3.2 3.2L13 4.8',
  'check-all': 'M1.5 8.5l3 3L11 5M7 11.5l.5.5L14.5 5',
  'circle-slash': 'M8 2.5a5.5 5.5 0 1 0 0 11a5.5 5.5 0 1 0 0-11zM4.1 11.9l7.8-7.8',
  discard: 'M3.5 2.5v3.5H7M3.8 6A4.6 4.6 0 1 1 5 11.9',
  circle: 'M8 3a5 5 0 1 0 0 10a5 5 0 1 0 0-10z',
  diff: 'M3.5 1.5h6l3 3v10h-9zM8 5.5v4M6 7.5h4M6 11.5h4',
  'eye-closed': 'M1.5 7c1.8 2.7 4 4 6.5 4s4.7-1.3 6.5-4M4 9.8l-1.2 1.7M8 11v2M12 9.8l1.2 1.7',
  'clear-all': 'M2 4.5h9M2 8h6M2 11.5h4M10 9l4 4M14 9l-4 4',
  history: 'M2.5 8a5.5 5.5 0 1 0 1.6-3.9M2.5 2.5v2.8h2.8M8 5v3.2l2.2 1.5',
  'debug-continue': 'M3.5 3v10M6.5 3l7 5-7 5z',
  refresh: 'M13.5 8a5.5 5.5 0 1 1-1.6-3.9M13.5 2.5v2.8h-2.8',
  keyboard: 'M1.5 4.5h13v7h-13zM4 7h1M7 7h1M10 7h1M4.5 9.5h7',
  pass: 'M8 2a6 6 0 1 0 0 12A6 6 0 1 0 8 2zM5 8.2l2 2 4-4.2',
  'git-commit': 'M8 5.2a2.8 2.8 0 1 0 0 5.6a2.8 2.8 0 1 0 0-5.6zM1 8h4.2M10.8 8H15',
  info: 'M8 2a6 6 0 1 0 0 12A6 6 0 1 0 8 2zM8 7v4.5M8 4.6v1',
  'chevron-down': 'M4 6l4 4 4-4',
  'chevron-right': 'M6 4l4 4-4 4',
  warning: 'M8 1.8l6.5 12H1.5zM8 6v4M8 11.5v1',
} as const;

export type IconName = keyof typeof PATHS;

const NS = 'http://www.w3.org/2000/svg';

export function icon(name: IconName): SVGSVGElement {
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 16 16');
  svg.setAttribute('width', '16');
  svg.setAttribute('height', '16');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  svg.setAttribute('class', `icon icon-${name}`);
  const path = document.createElementNS(NS, 'path');
  path.setAttribute('d', PATHS[name]);
  path.setAttribute('fill', 'none');
  path.setAttribute('stroke', 'currentColor');
  path.setAttribute('stroke-width', '1.3');
  path.setAttribute('stroke-linecap', 'round');
  path.setAttribute('stroke-linejoin', 'round');
  svg.append(path);
  return svg;
}
