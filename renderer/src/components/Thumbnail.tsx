/**
 * A scan's thumbnail. It needs the Authorization header, so it is fetched as a blob rather
 * than an <img src>; only when the row scrolls into view, so 500 rows do not mean 500 requests.
 */
import { useEffect, useRef, useState } from 'react';
import { useSession } from '../session.ts';

/** How long a thumbnail must stay in view before it is fetched. */
const SETTLE_MS = 150;

export function Thumbnail({ scanId }: { scanId: string }) {
  const { client } = useSession();
  const ref = useRef<HTMLDivElement>(null);
  const [visible, setVisible] = useState(false);
  const [url, setUrl] = useState<string | null>(null);
  const [failed, setFailed] = useState(false);

  useEffect(() => {
    const element = ref.current;
    if (!element) return;
    // Only a thumbnail still in view a moment later is fetched: rows a fast scroll passes over
    // (the worklist draws only the rows in view, issue 15) ask for nothing.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const observer = new IntersectionObserver((entries) => {
      clearTimeout(timer);
      if (!entries.some((entry) => entry.isIntersecting)) return;
      timer = setTimeout(() => {
        setVisible(true);
        observer.disconnect();
      }, SETTLE_MS);
    });
    observer.observe(element);
    return () => {
      clearTimeout(timer);
      observer.disconnect();
    };
  }, []);

  useEffect(() => {
    if (!visible) return;
    const controller = new AbortController();
    let objectUrl: string | null = null;
    client.binary(`/v1/scans/${encodeURIComponent(scanId)}/thumbnail`, { signal: controller.signal, accept: 'image/png' }).then(
      ({ blob }) => {
        objectUrl = URL.createObjectURL(blob);
        setUrl(objectUrl);
      },
      () => {
        if (!controller.signal.aborted) setFailed(true);
      },
    );
    return () => {
      controller.abort();
      if (objectUrl) URL.revokeObjectURL(objectUrl);
    };
  }, [visible, client, scanId]);

  return (
    <div className="thumb" ref={ref}>
      {url ? <img src={url} alt="" width={48} height={48} /> : <span className="thumb-empty">{failed ? '—' : ''}</span>}
    </div>
  );
}
