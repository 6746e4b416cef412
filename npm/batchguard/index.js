"use strict";
// batchguard for Node.js: the in-process guard and the schedulers' adapters. Every lease,
// fence, ledger row and deadline is the batchguard binary's (`run --link`); see
// docs/node-protocol.md in the repository.

const { guard, ERROR_CODES } = require("./lib/guard.js");
const { guarded, runCoordinator, tickTime } = require("./lib/adapters.js");
const { binaryPath } = require("./lib/binary.js");

module.exports = { guard, guarded, runCoordinator, tickTime, binaryPath, ERROR_CODES };
