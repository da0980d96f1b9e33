/** Where the liveedits phase's person saves (see liveWriter.ts and liveCheck.ts): kept apart so a workload bundle imports no more than these names. */
export const LIVE_DIR = 'live';
export const LIVE_FILES = 24;
