// @ts-check
/** Entry point of the session page `/s/{sessionId}`. */
import { mountSession } from './session-app.js';

const root = document.getElementById('app');
if (root) mountSession(root);
