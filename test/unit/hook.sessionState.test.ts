import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SessionFile, freshSession } from '../../src/hooks/sessionState';
import { tmpDir } from '../support/tmp';

/**
 * Hook session state names the person's prompts and lives in the store, which is
 * private (0700 directories, 0600 files): under umask 022 `.waypoint/hooks` was created
 * 0755 and its files 0644.
 */
describe('hooks: session state files are private whatever the umask', () => {
  const posix = process.platform !== 'win32';

  it('creates .waypoint/hooks 0700 and its files 0600 under umask 022, and tightens an older 0755 one', function () {
    if (!posix) this.skip();
    const t = tmpDir('wp-hookmode-');
    const old = process.umask(0o022);
    try {
      const store = path.join(t.dir, '.waypoint');
      fs.mkdirSync(store, { mode: 0o700 });
      const f = new SessionFile(store, 'claude-code', 'sess-1');
      f.write(freshSession('sess-1'));
      assert.equal(fs.statSync(path.dirname(f.file)).mode & 0o777, 0o700);
      assert.equal(fs.statSync(f.file).mode & 0o777, 0o600);
      assert.equal(f.read('sess-1').sessionId, 'sess-1');
      fs.chmodSync(path.dirname(f.file), 0o755);
      new SessionFile(store, 'claude-code', 'sess-2').write(freshSession('sess-2'));
      assert.equal(fs.statSync(path.dirname(f.file)).mode & 0o777, 0o700);
    } finally {
      process.umask(old);
      t.cleanup();
    }
  });

  it('refuses a hooks folder that is a symbolic link, writing nothing through it', function () {
    if (!posix) this.skip();
    const t = tmpDir('wp-hooklink-');
    try {
      const store = path.join(t.dir, '.waypoint');
      const elsewhere = path.join(t.dir, 'elsewhere');
      fs.mkdirSync(store);
      fs.mkdirSync(elsewhere);
      fs.symlinkSync(elsewhere, path.join(store, 'hooks'));
      assert.throws(() => new SessionFile(store, 'codex', 's').write(freshSession('s')), /not a directory/);
      assert.deepEqual(fs.readdirSync(elsewhere), []);
    } finally {
      t.cleanup();
    }
  });
});
