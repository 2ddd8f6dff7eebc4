/**
 * The data folder holds patient data, exports, logs and the pseudonym secret: what mia creates
 * there is readable by the account running mia only (PRODUCT.md, Security baseline).
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
