/**
 * Finds import cycles among a folder's TypeScript files. A cycle is counted whether
 * its imports are of values or only of types: a type-only edge still ties the two
 * modules' meaning together, and the loop it closes is what makes a module
 * impossible to read, test or move on its own. Imports are resolved with the
 * compiler's own module resolution (the project's tsconfig options), so what the
 * check sees is what `tsc` sees.
 *
 * TypeScript is already a dependency, and the shared tooling here adds none: a
 * resolver of its own would be a second opinion on what an import means.
 *
 * `node --import tsx scripts/importCycles.ts [dir]` (default `src`): prints each
 * cycle and exits 1 when there is one; `npm run lint` runs it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...tsFiles(p));
    else if (e.isFile() && p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

function compilerOptions(root: string): ts.CompilerOptions {
  const configPath = ts.findConfigFile(root, ts.sys.fileExists);
  if (!configPath) return { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext };
  const { config } = ts.readConfigFile(configPath, ts.sys.readFile);
  return ts.parseJsonConfigFileContent(config, ts.sys, path.dirname(configPath)).options;
}

/** Every file's imports (static, dynamic `import()` and `export … from`) that resolve to another file of the set. */
export function importGraph(dir: string, options = compilerOptions(dir)): Map<string, string[]> {
  const files = tsFiles(path.resolve(dir));
  const inSet = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const info = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    const targets = new Set<string>();
    for (const ref of info.importedFiles) {
      const resolved = ts.resolveModuleName(ref.fileName, file, options, ts.sys).resolvedModule?.resolvedFileName;
      if (resolved && inSet.has(path.resolve(resolved))) targets.add(path.resolve(resolved));
    }
    graph.set(file, [...targets].sort());
  }
  return graph;
}

export interface ImportCycle {
  /** Every file of the strongly connected component: each reaches each other by imports. */
  files: string[];
  /** One shortest loop through the component's first file, to show where to cut. */
  loop: string[];
}

/** The graph's strongly connected components of more than one file (or a file importing itself). */
export function findCycles(graph: Map<string, string[]>): ImportCycle[] {
  // Tarjan's algorithm, iterative: src is deep enough that recursion depth is not a worry, but a stack costs nothing.
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  for (const start of graph.keys()) {
    if (idx.has(start)) continue;
    const work: { node: string; next: number }[] = [{ node: start, next: 0 }];
    idx.set(start, index);
    low.set(start, index++);
    stack.push(start);
    onStack.add(start);
    while (work.length) {
      const top = work[work.length - 1]!;
      const edges = graph.get(top.node) ?? [];
      if (top.next < edges.length) {
        const to = edges[top.next++]!;
        if (!idx.has(to)) {
          idx.set(to, index);
          low.set(to, index++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, next: 0 });
        } else if (onStack.has(to)) {
          low.set(top.node, Math.min(low.get(top.node)!, idx.get(to)!));
        }
        continue;
      }
      work.pop();
      if (work.length) {
        const parent = work[work.length - 1]!.node;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
      }
      if (low.get(top.node) === idx.get(top.node)) {
        const comp: string[] = [];
        let n: string;
        do {
          n = stack.pop()!;
          onStack.delete(n);
          comp.push(n);
        } while (n !== top.node);
        if (comp.length > 1 || (graph.get(top.node) ?? []).includes(top.node)) components.push(comp.sort());
      }
    }
  }
  return components.map((files) => ({ files, loop: loopThrough(graph, files) }));
}

/** One concrete loop inside a component, starting at its first file (breadth-first, so the shortest). */
function loopThrough(graph: Map<string, string[]>, comp: string[]): string[] {
  const members = new Set(comp);
  const start = comp[0]!;
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const n = queue.shift()!;
    for (const to of graph.get(n) ?? []) {
      if (!members.has(to)) continue;
      if (to === start) {
        const loop = [n];
        for (let p = prev.get(n); p !== undefined; p = prev.get(p)) loop.unshift(p);
        return loop;
      }
      if (!prev.has(to) && to !== start) {
        prev.set(to, n);
        queue.push(to);
      }
    }
  }
  return comp;
}

function main(): void {
  const dir = process.argv[2] ?? 'src';
  const cycles = findCycles(importGraph(dir));
  const rel = (f: string): string => path.relative(process.cwd(), f);
  for (const { files, loop } of cycles) console.error(`import cycle among ${files.length} file(s) (${files.map(rel).join(', ')}); one loop: ${[...loop, loop[0]!].map(rel).join(' -> ')}`);
  if (cycles.length) {
    console.error(`${cycles.length} import cycle(s) in ${dir}: a module in a loop cannot be read, tested or moved on its own. Break each loop (move the shared type or helper into a module both sides import).`);
    process.exit(1);
  }
  console.log(`no import cycle in ${dir}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(__filename)) main();
