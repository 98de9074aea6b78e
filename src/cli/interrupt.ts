// Ctrl-C (or SIGTERM) during a command that changes servers step by step: say what state things are
// in and that a rerun finishes the job (install and sync are idempotent), then exit 130.
import { EXIT } from './exit-codes.ts';

/** Installs the handler; returns a function that removes it. */
export function announceInterrupt(command: string, state: string): () => void {
  const handler = (signal: NodeJS.Signals) => {
    console.error(`lww-sink ${command}: interrupted (${signal}); ${state}; rerun to finish`);
    process.exit(EXIT.interrupted);
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  return () => {
    process.off('SIGINT', handler);
    process.off('SIGTERM', handler);
  };
}
