/**
 * The plan file's format, for `--help` and the README: a JSON array of steps, as the
 * `Plan` schema in src/core/model/schema.ts takes it.
 */
export const PLAN_FORMAT = [
  'Plan file (--plan FILE): a JSON array of steps, at most 1000:',
  '  id         required: letters, digits and . _ : - /, starting with a letter or digit; at most 128 characters',
  '  title      required: 1 to 500 characters',
  '  dependsOn  optional: ids of steps that must be completed (or skipped) before this one starts',
  '  maxAttempts optional: 1 to 100 attempts for this step (over the task’s --max-attempts)',
  '  No other fields are accepted. Example:',
  '  [',
  '    { "id": "read", "title": "Read the code" },',
  '    { "id": "change", "title": "Change it", "dependsOn": ["read"] },',
  '    { "id": "test", "title": "Run the tests", "dependsOn": ["change"], "maxAttempts": 5 }',
  '  ]',
].join('\n');
