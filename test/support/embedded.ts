import type { EventStore } from '../../src/core/store/eventStore';
import type { Engine } from '../../src/core/engine/engine';

/**
 * The embedded store under an engine, for tests that reach past the engine into the
 * journal or the database (crash simulation, forced exports, raw projection dumps).
 * The engine itself knows only the EventLog and Projection interfaces. Told by its
 * backend, not by instanceof: in the extension host the engine comes from the bundle,
 * whose EventStore is another class object than the test's.
 */
export function embeddedStore(engine: Engine): EventStore {
  const log = engine.eventLog;
  if (log.backend !== 'embedded') throw new Error(`this test needs the embedded store; the engine runs on ${log.backend}`);
  return log as EventStore;
}
