/**
 * Imported first by a webview page: zod must not probe for `new Function`. The page's
 * CSP forbids eval, so the probe always fails, and the browser still reports each
 * attempt as a `securitypolicyviolation` (work on the page's first parse, and console
 * noise). Without the probe zod validates the same way, without compiled fast paths.
 */
import { z } from 'zod';

z.config({ jitless: true });
