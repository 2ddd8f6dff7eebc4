/**
 * One serializer per resource, feeding CSV and XML alike (JSON is the record itself). CSV
 * column orders are fixed and documented in docs/formats.md; never reorder, only append.
 */
import { mmUnit } from '#common/pixel-spacing.ts';
import type { ExportRecord, Report, ScanResultV11 } from '#server/api/schemas.ts';
import { csvField, csvLines } from '#server/formats/csv.ts';
import { maskArea } from '#common/rle-mask.ts';

export type ResourceSerializer<T> = {
  /** XML element holding the items, and the name of each item element. */
  collection: string;
  item: string;
  /** Element names for the items of nested arrays, by the array's key. */
  xmlItemNames: Readonly<Record<string, string>>;
  columns: readonly string[];
  /** The item's CSV lines, in `columns` order, each ending CRLF. */
  csvLines(item: T): string;
};

const XML_ITEM_NAMES = {
  findings: 'finding',
  scopes: 'scope',
  extra_scopes: 'scope',
  items: 'item',
  addenda: 'addendum',
  finding_changes: 'finding_change',
  lesions: 'lesion',
  finding_ids: 'finding_id',
  measurements: 'measurement',
  points: 'point',
  // A segmentation finding's mask runs (common/rle-mask.ts).
  counts: 'run',
};

/** A report's lesions as one CSV cell, one per line: "label: slices 4-6 of 20, largest 23.4 mm (accepted)". */
function lesionsCell(report: Report): string {
  return report.lesions
    .map((l) => {
      const slices = l.first_slice === null ? 'slice unknown' : l.first_slice === l.last_slice ? `slice ${l.first_slice}` : `slices ${l.first_slice}-${l.last_slice ?? ''}`;
      const of = l.slices === null ? '' : ` of ${l.slices}`;
      const size = l.largest_diameter_mm === null ? 'size unknown (no pixel spacing)' : `largest ${l.largest_diameter_mm} ${mmUnit(l.spacing_source)}`;
      return `${l.label}: ${slices}${of}, ${size} (${l.review ?? 'not reviewed'})`;
    })
    .join('\n');
}

/** A report's measurements as one CSV cell, one per line: "length 60.0 mm (image 1.2.3 frame 1)". */
function measurementsCell(report: Report): string {
  return report.measurements
    .map((m) => {
      const unit = m.unit ? ` ${m.unit}` : '';
      const mm = (v: number | null, what: string) => (v === null ? `${what} unknown (no pixel spacing)` : `${what} ${v.toFixed(1)}`);
      // Sizes from Imager Pixel Spacing are at the detector, and say so (common/pixel-spacing.ts).
      const text =
        m.kind === 'length'
          ? `${mm(m.length_mm, 'length')} ${mmUnit(m.pixel_spacing_source)}`
          : m.kind === 'probe'
            ? `value ${m.value === null ? 'unknown' : m.value.toFixed(1)}${unit}`
            : `${m.kind} ${mm(m.area_mm2, 'area')} ${mmUnit(m.pixel_spacing_source).replace('mm', 'mm2')}, mean ${m.mean === null ? 'unknown' : m.mean.toFixed(1)}${unit}, SD ${m.sd === null ? 'unknown' : m.sd.toFixed(1)}${unit}`;
      return `${text} (image ${m.instance_uid} frame ${m.frame + 1})`;
    })
    .join('\n');
}

/** A report's addenda as one CSV cell: each "time author: text" plus its verdict changes, a blank line apart. */
function addendaCell(report: Report): string {
  return report.addenda
    .map((a) => {
      const changes = a.finding_changes.map((c) =>
        c.added ? `${c.label} ${c.finding_id}: added by the reader, accepted` : `${c.label} ${c.finding_id}: ${c.from ?? 'not reviewed'} -> ${c.to ?? 'not reviewed'}`,
      );
      return `${a.created_at} ${a.author.email}: ${a.text}${changes.length === 0 ? '' : ` [verdicts: ${changes.join('; ')}]`}`;
    })
    .join('\n\n');
}

/** One row per finding; a scan without findings still gets one row, with empty finding cells,
 * so "analysed, nothing found" is distinguishable from "not analysed" in the file. */
export const scanResultSerializer: ResourceSerializer<ScanResultV11> = {
  collection: 'scan_results',
  item: 'scan_result',
  xmlItemNames: XML_ITEM_NAMES,
  columns: [
    'patient_id',
    'scan_id',
    'modality',
    'recommendation',
    'finding_index',
    'label',
    'confidence',
    'x',
    'y',
    'width',
    'height',
    'instance_uid',
    'frame',
    'review',
    'finding_id',
    'analysis_id',
    'model_id',
    'model_name',
    'model_version',
    'analysis_finished_at',
    'slice',
    'slices',
    'position_mm',
    'width_mm',
    'height_mm',
    'lesion_id',
    'source',
    'review_reason',
    'localization',
    'mask_area_px',
    'threshold',
    'operating_point',
  ],
  csvLines(result) {
    // Written as text, not as a row object per finding read back by column name: an export is a
    // million of these lines, and the object per line with 32 keys, each cell looked up by name
    // and the cells every line of a result shares escaped again per line were two thirds of a
    // CSV export page's time (2026-11-27). The cells a result's lines share are escaped once.
    const analysis = result.analysis;
    const head = `${csvField(result.patient_id)},${csvField(result.scan_id)},${csvField(result.modality)},${csvField(result.recommendation)},`;
    const middle = `,${csvField(analysis.id)},${csvField(analysis.model.id)},${csvField(analysis.model.name)},${csvField(analysis.model.version)},${csvField(analysis.finished_at)},`;
    if (result.findings.length === 0) {
      // Empty finding cells (finding_index..finding_id, slice..threshold), then operating_point.
      return `${head}${EMPTY_FINDING_CELLS}${middle}${EMPTY_PLACE_CELLS},${csvField(analysis.operating_point ?? null)}\r\n`;
    }
    let out = '';
    for (let index = 0; index < result.findings.length; index += 1) {
      const finding = result.findings[index]!;
      const place = finding.place;
      const at = finding.location;
      out +=
        `${head}${index},${csvField(finding.label)},${csvField(finding.confidence)},${csvField(at.x)},${csvField(at.y)},${csvField(at.width)},${csvField(at.height)},` +
        `${csvField(finding.instance_uid)},${csvField(finding.frame)},${csvField(finding.review)},${csvField(finding.id)}${middle}` +
        (place
          ? `${csvField(place.slice)},${csvField(place.slices)},${csvField(place.position_mm)},${csvField(place.width_mm)},${csvField(place.height_mm)},`
          : ',,,,,') +
        `${csvField(lesionIdOf(result.lesions, finding.id))},${csvField(finding.source ?? 'model')},${csvField(finding.review_reason ?? null)},` +
        // x/y/width/height of an 'image' finding are the whole key image, not a lesion's box.
        `${csvField(finding.localization ?? 'box')},` +
        // The mask itself is in the JSON and XML; a CSV cell says there is one, and its size.
        `${finding.mask ? csvField(maskArea(finding.mask)) : ''},` +
        // What decided the finding: its label's threshold and the operating point it came from.
        `${csvField(finding.threshold ?? null)},${csvField(finding.operating_point ?? null)}\r\n`;
    }
    return out;
  },
};

const EMPTY_FINDING_CELLS = ','.repeat(10);
const EMPTY_PLACE_CELLS = ','.repeat(10);

/** The lesion a finding belongs to (none for a finding about a whole image). A result has a
 * handful of lesions: a map of them per result cost more than these loops. */
function lesionIdOf(lesions: ScanResultV11['lesions'], findingId: string): string | null {
  for (const lesion of lesions) if (lesion.finding_ids.includes(findingId)) return lesion.id;
  return null;
}

export const reportSerializer: ResourceSerializer<Report> = {
  collection: 'reports',
  item: 'report',
  xmlItemNames: XML_ITEM_NAMES,
  columns: [
    'id',
    'scan_id',
    'patient_id',
    'modality',
    'status',
    'impression',
    'recommendation',
    'finding_count',
    'labels',
    'author_id',
    'author_email',
    'created_at',
    'updated_at',
    'finalized_at',
    'finalized_by',
    'analysis_id',
    'model_name',
    'model_version',
    'recommendation_basis',
    'addenda',
    'lesions',
    'measurements',
  ],
  csvLines(report) {
    return csvLines(reportSerializer.columns, [
      {
        id: report.id,
        scan_id: report.scan_id,
        patient_id: report.patient_id,
        modality: report.modality,
        status: report.status,
        impression: report.impression,
        recommendation: report.recommendation,
        finding_count: report.findings.length,
        labels: [...new Set(report.findings.map((f) => f.label))].join(';'),
        author_id: report.author.id,
        author_email: report.author.email,
        created_at: report.created_at,
        updated_at: report.updated_at,
        finalized_at: report.finalized_at,
        finalized_by: report.finalized_by,
        analysis_id: report.analysis?.id ?? null,
        model_name: report.analysis?.model_name ?? null,
        model_version: report.analysis?.model_version ?? null,
        recommendation_basis: report.recommendation_basis,
        addenda: addendaCell(report),
        lesions: lesionsCell(report),
        measurements: measurementsCell(report),
      },
    ]);
  },
};

export const exportSerializer: ResourceSerializer<ExportRecord> = {
  collection: 'exports',
  item: 'export',
  xmlItemNames: XML_ITEM_NAMES,
  columns: ['id', 'format', 'deidentified', 'status', 'row_count', 'size_bytes', 'sha256', 'created_by', 'created_at', 'download_url', 'filters'],
  csvLines(record) {
    return csvLines(exportSerializer.columns, [
      {
        id: record.id,
        format: record.format,
        deidentified: record.deidentified,
        status: record.status,
        row_count: record.row_count,
        size_bytes: record.size_bytes,
        sha256: record.sha256,
        created_by: record.created_by,
        created_at: record.created_at,
        download_url: record.download_url,
        filters: JSON.stringify(record.filters),
      },
    ]);
  },
};
