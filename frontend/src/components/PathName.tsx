import { shown } from "../lib/names";

const why =
  "This name holds characters that would display as something else (control, escape, bidirectional or invisible): it is shown quoted, with them escaped";

/** PathName shows a path a session named as it is, never as it displays
 * (lib/names.ts); a name that needed quoting is marked. raw is the API's
 * raw_path, for a path that is not valid UTF-8. */
export function PathName({ path, raw }: { path: string; raw?: string }) {
  const s = shown(path, raw);
  if (!s.quoted) return <>{path}</>;
  return (
    <span className="name-quoted" title={why}>
      <span className="badge warn" aria-label="a misleading name, shown escaped">
        ⚠
      </span>{" "}
      {s.text}
    </span>
  );
}
