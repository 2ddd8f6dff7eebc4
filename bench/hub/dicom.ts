/**
 * Distinct DICOM instances for POST /v1/instances, made in memory from one template file: the
 * SOP Instance UID (and the file meta copy of it), the Series and Study Instance UIDs and the
 * Patient ID are overwritten in place with values of the same length, so every request is a new
 * instance the server must parse, hash, copy, fsync and index (never a duplicate). Instances
 * spread over SERIES series in STUDIES studies, one patient per study.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import dicomParser from 'dicom-parser';

const PYDICOM_CT = '/usr/lib/python3/dist-packages/pydicom/data/test_files/CT_small.dcm';
const PHANTOMS = join(import.meta.dirname, '../../models/mia-phantom-detector/phantoms.py');
export const SERIES = 100;
export const STUDIES = 20;

type Field = { offset: number; length: number };
export type Template = { bytes: Buffer; source: string; sop: Field[]; study: Field; series: Field; patient: Field };

/** pydicom's CT_small.dcm (128x128 16-bit CT, explicit VR little endian), else one generated phantom CT slice. */
function templateBytes(): { bytes: Buffer; source: string } {
  if (existsSync(PYDICOM_CT)) return { bytes: readFileSync(PYDICOM_CT), source: "pydicom's CT_small.dcm" };
  const dir = mkdtempSync(join(tmpdir(), 'mia-hub-dicom-'));
  try {
    const gen = spawnSync('/usr/bin/python3', [PHANTOMS, '--out', dir, '--series', '1', '--seed', '1', '--size', '128', '--slices', '1', '--modality', 'CT'], { encoding: 'utf8' });
    if (gen.status !== 0) throw new Error(`no template DICOM: ${PYDICOM_CT} missing and phantoms.py failed: ${gen.stderr}`);
    const file = findFile(dir);
    return { bytes: readFileSync(file), source: 'a generated phantom CT slice (phantoms.py, 128x128)' };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function findFile(dir: string): string {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return findFile(path);
    return path;
  }
  throw new Error(`no file under ${dir}`);
}

export function loadTemplate(): Template {
  const { bytes, source } = templateBytes();
  const data = dicomParser.parseDicom(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length));
  const field = (tag: string, minLength = 28): Field => {
    const element = data.elements[tag];
    if (!element || element.length < minLength) throw new Error(`template lacks ${tag} of at least ${minLength} bytes`);
    return { offset: element.dataOffset, length: element.length };
  };
  const sop = [field('x00080018')];
  if (data.elements['x00020003']) sop.push(field('x00020003'));
  return { bytes, source, sop, study: field('x0020000d'), series: field('x0020000e'), patient: field('x00100020', 3) };
}

/** A UID filling the field's (even) length exactly, unique per (kind, n). */
function writeUid(target: Buffer, field: Field, kind: number, n: number): void {
  const head = `1.2.826.0.1.9.7.${kind}.`;
  const width = field.length - head.length;
  // The last component has no leading zero: "1" then n zero-padded.
  const tail = `1${String(n).padStart(width - 1, '0')}`;
  if (tail.length !== width) throw new Error(`UID field of ${field.length} bytes too short for ${n}`);
  target.write(head + tail, field.offset, field.length, 'latin1');
}

/** Instance n of the run: its own SOP Instance UID, series n % SERIES, study (series % STUDIES). */
export function instance(template: Template, n: number): Buffer {
  const out = Buffer.from(template.bytes);
  for (const field of template.sop) writeUid(out, field, 1, n);
  const series = n % SERIES;
  const study = series % STUDIES;
  writeUid(out, template.series, 2, series);
  writeUid(out, template.study, 3, study);
  const id = `P${String(study).padStart(template.patient.length - 1, '0')}`;
  out.write(id, template.patient.offset, template.patient.length, 'latin1');
  return out;
}
