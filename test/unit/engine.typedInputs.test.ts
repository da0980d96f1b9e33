import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

/**
 * Input is validated once, where it enters (the operation table's in-process adapter
 * and the owner's `/rpc`, both in api.ts; the MCP SDK; the CLI's flags; a webview's
 * protocol; a hook's adapter). Past that door the engine takes the table's parsed
 * types: no method of the engine or of its concerns accepts `unknown` (or `any`) and
 * parses it again. This reads the engine's sources with the TypeScript checker, so a
 * new `raw: unknown` method fails here, as does a `parseInput` call inside the engine.
 */
const ENGINE_DIR = path.resolve(__dirname, '../../src/core/engine');
/** The doors themselves: they take what arrives and parse it with the operation's schema. */
const DOORS = new Set(['api.ts', 'loopback.ts']);

interface Loose {
  where: string;
  param: string;
  type: string;
}

/** Every parameter typed `unknown` or `any` of the exported classes' public methods and of the exported functions over the core in `files`. */
function looseParameters(program: ts.Program, files: readonly string[]): Loose[] {
  const checker = program.getTypeChecker();
  const found: Loose[] = [];
  const check = (where: string, params: readonly ts.ParameterDeclaration[]) => {
    for (const p of params) {
      const t = checker.getTypeAtLocation(p);
      const stripped = t.isUnion() ? t.types.filter((u) => !(u.flags & ts.TypeFlags.Undefined)) : [t];
      if (stripped.some((u) => u.flags & (ts.TypeFlags.Unknown | ts.TypeFlags.Any))) found.push({ where, param: p.name.getText(), type: checker.typeToString(t) });
    }
  };
  for (const file of files) {
    const sf = program.getSourceFile(file);
    assert.ok(sf, `${file} is in the program`);
    const exported = (n: ts.Node) => ts.canHaveModifiers(n) && !!ts.getModifiers(n)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    const hidden = (n: ts.ClassElement) => ts.canHaveModifiers(n) && !!ts.getModifiers(n)?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword || m.kind === ts.SyntaxKind.ProtectedKeyword);
    ts.forEachChild(sf, (node) => {
      if (ts.isClassDeclaration(node) && node.name && exported(node)) {
        for (const m of node.members) {
          if ((ts.isMethodDeclaration(m) || ts.isConstructorDeclaration(m)) && !hidden(m) && !ts.isConstructorDeclaration(m)) check(`${path.basename(file)} ${node.name.text}.${m.name.getText()}`, m.parameters);
        }
      }
      // A function is an engine operation when it runs over the engine's core (reopenTask, recordTurn); a predicate on a caught error is not.
      const overCore = (n: ts.FunctionDeclaration) => /^(EngineCore|Engine)$/.test(n.parameters[0]?.type?.getText() ?? '');
      if (ts.isFunctionDeclaration(node) && node.name && exported(node) && overCore(node)) check(`${path.basename(file)} ${node.name.text}`, node.parameters);
    });
  }
  return found;
}

function programOf(files: readonly string[], host?: ts.CompilerHost): ts.Program {
  return ts.createProgram(files, { strict: true, noEmit: true, skipLibCheck: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, types: ['node'] }, host);
}

describe('engine: input validated once, at the door', function () {
  this.timeout(120_000);

  it('the check finds a method that takes unknown (so it can fail)', () => {
    const file = path.join(ENGINE_DIR, '__probe__.ts');
    const source = 'export class Probe { ok(input: { a: string }): void {} bad(raw: unknown): void {} maybe(raw?: unknown): void {} private inner(raw: unknown): void {} }\nexport class EngineCore {}\nexport function loose(core: EngineCore, x: any): void {}\nexport function isProbeError(e: unknown): boolean { return !!e; }\n';
    const host = ts.createCompilerHost({});
    const read = host.getSourceFile.bind(host);
    host.getSourceFile = (name, lang, onError) => (path.resolve(name) === file ? ts.createSourceFile(name, source, lang) : read(name, lang, onError));
    host.fileExists = ((exists) => (name: string) => path.resolve(name) === file || exists(name))(host.fileExists.bind(host));
    const found = looseParameters(programOf([file], host), [file]);
    assert.deepEqual(
      found.map((f) => `${f.where}(${f.param})`),
      ['__probe__.ts Probe.bad(raw)', '__probe__.ts Probe.maybe(raw)', '__probe__.ts loose(x)'],
    );
  });

  it('no method of the engine or of its concerns takes unknown or any', () => {
    const files = fs
      .readdirSync(ENGINE_DIR)
      .filter((f) => f.endsWith('.ts') && !DOORS.has(f))
      .map((f) => path.join(ENGINE_DIR, f));
    assert.ok(files.some((f) => f.endsWith('engine.ts')));
    const found = looseParameters(programOf(files), files);
    assert.deepEqual(found, [], `engine methods must take the operation table's parsed input types:\n${found.map((f) => `  ${f.where}: ${f.param}: ${f.type}`).join('\n')}`);
  });

  it('the engine parses no input itself: parseInput is called only at the door (api.ts)', () => {
    const callers = fs
      .readdirSync(ENGINE_DIR)
      .filter((f) => f.endsWith('.ts') && /\bparseInput\s*\(/.test(fs.readFileSync(path.join(ENGINE_DIR, f), 'utf8')));
    assert.deepEqual(callers, ['api.ts']);
  });
});
