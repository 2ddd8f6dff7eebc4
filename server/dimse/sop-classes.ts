/**
 * The SOP classes mia's DIMSE services speak (PS3.4 Annex B and C, PS3.6 Annex A). The storage
 * classes are the image objects mia's import keeps (it refuses objects without pixel data), and
 * the transfer syntaxes accepted for them are those mia decodes (server/dicom/transfer-syntax.ts).
 */
import { findTransferSyntax } from '#server/dicom/transfer-syntax.ts';

export const VERIFICATION = '1.2.840.10008.1.1';

export const QUERY_RETRIEVE = {
  patientRootFind: '1.2.840.10008.5.1.4.1.2.1.1',
  patientRootMove: '1.2.840.10008.5.1.4.1.2.1.2',
  studyRootFind: '1.2.840.10008.5.1.4.1.2.2.1',
  studyRootMove: '1.2.840.10008.5.1.4.1.2.2.2',
} as const;

const IMAGE_STORAGE: ReadonlyArray<readonly [string, string]> = [
  ['1.2.840.10008.5.1.4.1.1.1', 'CR Image'],
  ['1.2.840.10008.5.1.4.1.1.1.1', 'Digital X-Ray Image - For Presentation'],
  ['1.2.840.10008.5.1.4.1.1.1.1.1', 'Digital X-Ray Image - For Processing'],
  ['1.2.840.10008.5.1.4.1.1.1.2', 'Digital Mammography X-Ray Image - For Presentation'],
  ['1.2.840.10008.5.1.4.1.1.1.2.1', 'Digital Mammography X-Ray Image - For Processing'],
  ['1.2.840.10008.5.1.4.1.1.1.3', 'Digital Intra-Oral X-Ray Image - For Presentation'],
  ['1.2.840.10008.5.1.4.1.1.1.3.1', 'Digital Intra-Oral X-Ray Image - For Processing'],
  ['1.2.840.10008.5.1.4.1.1.2', 'CT Image'],
  ['1.2.840.10008.5.1.4.1.1.2.1', 'Enhanced CT Image'],
  ['1.2.840.10008.5.1.4.1.1.2.2', 'Legacy Converted Enhanced CT Image'],
  ['1.2.840.10008.5.1.4.1.1.3', 'Ultrasound Multi-frame Image (Retired)'],
  ['1.2.840.10008.5.1.4.1.1.3.1', 'Ultrasound Multi-frame Image'],
  ['1.2.840.10008.5.1.4.1.1.4', 'MR Image'],
  ['1.2.840.10008.5.1.4.1.1.4.1', 'Enhanced MR Image'],
  ['1.2.840.10008.5.1.4.1.1.4.3', 'Enhanced MR Color Image'],
  ['1.2.840.10008.5.1.4.1.1.4.4', 'Legacy Converted Enhanced MR Image'],
  ['1.2.840.10008.5.1.4.1.1.5', 'NM Image (Retired)'],
  ['1.2.840.10008.5.1.4.1.1.6', 'Ultrasound Image (Retired)'],
  ['1.2.840.10008.5.1.4.1.1.6.1', 'Ultrasound Image'],
  ['1.2.840.10008.5.1.4.1.1.6.2', 'Enhanced US Volume'],
  ['1.2.840.10008.5.1.4.1.1.7', 'Secondary Capture Image'],
  ['1.2.840.10008.5.1.4.1.1.7.1', 'Multi-frame Single Bit Secondary Capture Image'],
  ['1.2.840.10008.5.1.4.1.1.7.2', 'Multi-frame Grayscale Byte Secondary Capture Image'],
  ['1.2.840.10008.5.1.4.1.1.7.3', 'Multi-frame Grayscale Word Secondary Capture Image'],
  ['1.2.840.10008.5.1.4.1.1.7.4', 'Multi-frame True Color Secondary Capture Image'],
  ['1.2.840.10008.5.1.4.1.1.12.1', 'X-Ray Angiographic Image'],
  ['1.2.840.10008.5.1.4.1.1.12.1.1', 'Enhanced XA Image'],
  ['1.2.840.10008.5.1.4.1.1.12.2', 'X-Ray Radiofluoroscopic Image'],
  ['1.2.840.10008.5.1.4.1.1.12.2.1', 'Enhanced XRF Image'],
  ['1.2.840.10008.5.1.4.1.1.13.1.1', 'X-Ray 3D Angiographic Image'],
  ['1.2.840.10008.5.1.4.1.1.13.1.2', 'X-Ray 3D Craniofacial Image'],
  ['1.2.840.10008.5.1.4.1.1.13.1.3', 'Breast Tomosynthesis Image'],
  ['1.2.840.10008.5.1.4.1.1.13.1.4', 'Breast Projection X-Ray Image - For Presentation'],
  ['1.2.840.10008.5.1.4.1.1.13.1.5', 'Breast Projection X-Ray Image - For Processing'],
  ['1.2.840.10008.5.1.4.1.1.20', 'NM Image'],
  ['1.2.840.10008.5.1.4.1.1.77.1.1', 'VL Endoscopic Image'],
  ['1.2.840.10008.5.1.4.1.1.77.1.2', 'VL Microscopic Image'],
  ['1.2.840.10008.5.1.4.1.1.77.1.3', 'VL Slide-Coordinates Microscopic Image'],
  ['1.2.840.10008.5.1.4.1.1.77.1.4', 'VL Photographic Image'],
  ['1.2.840.10008.5.1.4.1.1.77.1.5.1', 'Ophthalmic Photography 8 Bit Image'],
  ['1.2.840.10008.5.1.4.1.1.77.1.5.2', 'Ophthalmic Photography 16 Bit Image'],
  ['1.2.840.10008.5.1.4.1.1.128', 'PET Image'],
  ['1.2.840.10008.5.1.4.1.1.128.1', 'Legacy Converted Enhanced PET Image'],
  ['1.2.840.10008.5.1.4.1.1.130', 'Enhanced PET Image'],
  ['1.2.840.10008.5.1.4.1.1.481.1', 'RT Image'],
];

export const IMAGE_STORAGE_CLASSES: ReadonlySet<string> = new Set(IMAGE_STORAGE.map(([uid]) => uid));

/** A transfer syntax whose pixel data mia can decode, so an instance in it is worth receiving. */
export function isDecodableSyntax(uid: string): boolean {
  const syntax = findTransferSyntax(uid);
  return syntax !== undefined && syntax.encoding !== 'unsupported';
}
