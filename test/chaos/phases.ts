export const PHASES = ['events', 'checkpoints', 'rollbacks', 'review', 'mcp', 'stall', 'liveedits'] as const;
export type Phase = (typeof PHASES)[number];
/**
 * The phases whose workload runs in a workload child (mcp's victim is the real
 * `waypoint mcp` server; stall runs the events workload twice: an owner SIGSTOPped
 * past its lease, and the successor that takes the store over while it sleeps;
 * liveedits runs the rollbacks workload while a person's process keeps saving files).
 */
export type ChildPhase = Exclude<Phase, 'mcp' | 'stall'>;
