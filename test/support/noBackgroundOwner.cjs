'use strict';
// The suites that test everything else run the CLI as it behaves with no background owner
// (every call owns the store or relays to the owner the test started), so that no test
// leaves a detached owner holding its temporary store. test/unit/backgroundOwner.test.ts
// turns it back on for the processes it starts.
process.env.WAYPOINT_NO_DAEMON ??= '1';
