/**
 * The patient's name for the viewer's overlay. Names are PHI (PRODUCT.md) and the scan API does
 * not carry them; the tag browser's endpoint does, for read:scans keys, and audits each read
 * with the patient, so the overlay reads Patient's Name (0010,0010) from it once per series.
 */
import { useEffect, useState } from 'react';
import { personName } from '../person-name.ts';
import { useSession } from '../session.ts';

export function PatientName({ instanceUid }: { instanceUid: string | null }) {
  const { client } = useSession();
  const [name, setName] = useState<string | null>(null);
  useEffect(() => {
    setName(null);
    if (!instanceUid) return;
    const controller = new AbortController();
    client.get<{ tags: { tag: string; value: string | null }[] }>(`/v1/instances/${encodeURIComponent(instanceUid)}/tags`, { signal: controller.signal }).then(
      (reply) => {
        const value = reply.tags.find((t) => t.tag === '(0010,0010)')?.value ?? '';
        if (!controller.signal.aborted) setName(personName(value));
      },
      // The name is a convenience beside the patient ID; without it the overlay still identifies the patient.
      () => undefined,
    );
    return () => controller.abort();
  }, [client, instanceUid]);
  return name ? <span data-testid="patient-name">{name} · </span> : null;
}
