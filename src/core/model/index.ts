export * from './errors';
export * from './schema';
export * from './stateMachine';
export * from './plan';
export * from './validate';
export * from './taskStates';
