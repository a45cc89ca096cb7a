import { useState } from "react";

// useBusy runs one action at a time: run(what, f) marks `what` busy while
// f runs, then reloads; a failure of either goes to onError.
export function useBusy(reload: () => Promise<void>, onError: (e: unknown) => void) {
  const [busy, setBusy] = useState("");
  const run = async (what: string, f: () => Promise<unknown>) => {
    setBusy(what);
    try {
      await f();
      await reload();
    } catch (e) {
      onError(e);
    } finally {
      setBusy("");
    }
  };
  return { busy, run };
}
