/**
 * Imported first by a webview page: zod must not probe for `new Function`. The page's
 * CSP forbids eval, so the probe always fails, and the browser still reports each
 * attempt as a `securitypolicyviolation` (work on the page's first parse, and console
 * noise). Without the probe zod validates the same way, without compiled fast paths.
 * The pages speak zod/mini, which carries no messages of its own: English ones, so a
 * refused message's log line says what was wrong.
 */
import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

config({ jitless: true, ...en() });
