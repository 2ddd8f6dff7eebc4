/**
 * The patient's name for the viewer's overlay. Names are PHI (PRODUCT.md) and the scan API does
 * not carry them; the tag browser's endpoint does, for read:scans keys, and audits each read
 * with the patient, so the overlay reads Patient's Name (0010,0010) from it once per series.
 */
import { useEffect, useState } from 'react';
import { personName } from '../person-name.ts';
import { useSession } from '../session.ts';

/**
 * `value`: a Patient's Name already at hand (a PACS search result), shown as a reader expects it;
 * `instanceUid`: read from a stored image, for the viewer's overlay.
 */
export function PatientName(props: { instanceUid: string | null } | { value: string }) {
  if ('value' in props) {
    const name = personName(props.value);
    return name ? <span data-testid="patient-name">{name}</span> : <span className="muted">—</span>;
  }
  return <StoredPatientName instanceUid={props.instanceUid} />;
}

function StoredPatientName({ instanceUid }: { instanceUid: string | null }) {
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
