/** A world's storage on the overview: bytes in use against its quota, with a meter. */
import type { WorldStorage } from "@vw/contracts";

const UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"] as const;

/** `1.2 MiB`, `10 GiB`, `512 bytes`: binary units, as the quotas are set. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  const digits = unit === 0 || value >= 100 || Number.isInteger(value) ? 0 : 1;
  return `${value.toFixed(digits)} ${UNITS[unit]}`;
}

/** What is shown once the world is at 90% of its quota: writes that add bytes will soon be refused. */
const NEARLY_FULL = 0.9;

export function StorageUse({ storage }: { storage: WorldStorage }) {
  if (storage.bytesInUse === null) {
    return (
      <span data-testid="storage-use">
        Not counted yet (map-storage counts it shortly, or at the next upload); the quota is {formatBytes(storage.maxBytes)}.
      </span>
    );
  }
  const share = storage.bytesInUse / storage.maxBytes;
  const percent = share >= 0.01 || share === 0 ? `${Math.round(share * 100)}%` : "less than 1%";
  return (
    <div className="storage-use">
      <span data-testid="storage-use">
        {formatBytes(storage.bytesInUse)} of {formatBytes(storage.maxBytes)} used ({percent})
      </span>
      <meter
        className="storage-meter"
        aria-label="Storage used"
        min={0}
        max={storage.maxBytes}
        value={Math.min(storage.bytesInUse, storage.maxBytes)}
        low={storage.maxBytes * 0.75}
        high={storage.maxBytes * NEARLY_FULL}
        optimum={0}
      />
      {share >= NEARLY_FULL ? (
        <p className="warning" role="status">
          Nearly full: an upload or a file that would pass the quota is refused. Delete files, or ask the platform to raise the quota.
        </p>
      ) : null}
    </div>
  );
}
