/**
 * Who wrote a file or speaks on an association (PS3.7 D.3.3.2, PS3.10 7.1): mia's Implementation
 * Class UID (one fixed UID derived from its name, hashed-uid.ts) and Implementation Version Name
 * (at most 16 characters, SH).
 */
import { hashedUid } from '#server/dicom/write/hashed-uid.ts';

export const MIA_IMPLEMENTATION_CLASS_UID = hashedUid('mia implementation class');

/**
 * Fixed rather than read from package.json: written objects must stay byte-identical across
 * releases that do not change how they are encoded (routing and PACS round trips compare them).
 * Raise it when the encoding of what mia writes changes.
 */
export const MIA_IMPLEMENTATION_VERSION_NAME = 'MIA_1';
