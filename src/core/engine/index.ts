export * from './engine';
export * from './inputs';
export * from './resumeContext';
export * from './snapshotter';
export { Queries } from '../store/queries';
