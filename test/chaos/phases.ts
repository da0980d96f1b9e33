export const PHASES = ['events', 'checkpoints', 'rollbacks', 'review', 'mcp'] as const;
export type Phase = (typeof PHASES)[number];
/** The phases whose workload runs in a workload child (mcp's victim is the real `waypoint mcp` server). */
export type ChildPhase = Exclude<Phase, 'mcp'>;
