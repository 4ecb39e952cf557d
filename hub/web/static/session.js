// @ts-check
/** Entry point of the session page `/s/{sessionId}`. */
import { mountSession } from './session-app.js';
import { sharedToken } from './token.js';

const root = document.getElementById('app');
// A tab opened without a token takes the one another tab of this origin has (token.js).
if (root) sharedToken().then(() => mountSession(root));
