// The ESM entry point: the same functions as the CommonJS one (one implementation).
import batchguard from "./index.js";

export const { guard, guarded, runCoordinator, tickTime, binaryPath, ERROR_CODES } = batchguard;
export default batchguard;
