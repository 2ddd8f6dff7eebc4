import { XMLValidator } from 'fast-xml-parser';
import { describe, expect, it } from 'vitest';
import { csvField, toCsv } from '#server/formats/csv.ts';
import { escapeXml, toXmlDocument } from '#server/formats/xml.ts';

describe('CSV (RFC 4180 with a formula guard)', () => {
  it('quotes commas, quotes and line breaks; doubles quotes', () => {
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\r\nlines')).toBe('"two\r\nlines"');
    expect(csvField('Müller^Zoë')).toBe('Müller^Zoë');
  });

  it('neutralises formulas but keeps their text, and leaves numbers alone', () => {
    for (const formula of ['=1+1', '+SUM(A1)', '-2+3', '@cmd', '\tx', '\rx']) expect(csvField(formula)).toBe(csvField(`'${formula}`));
    expect(csvField(-2.5)).toBe('-2.5');
    expect(csvField(null)).toBe('');
  });

  it('neutralises formulas behind whitespace or line breaks, full-width triggers and DDE pipes', () => {
    const hidden = [
      '\n=1+1', '\r\n=1+1', ' =1+1', '  \t+SUM(A1)', '\u3000=1', '\u00a0@cmd', '\0=1', '\nplain',
      '＝1+1', '＋1', '－1', '＠SUM(A1)', '｜x', '﹦1', ' ＝HYPERLINK("http://evil.example")',
      "|cmd '/c calc'!A1", " |cmd '/c calc'!A1",
    ];
    for (const formula of hidden) expect(csvField(formula), JSON.stringify(formula)).toBe(csvField(`'${formula}`));
    for (const plain of ['Müller^Zoë', 'a=b', 'x|y', 'left - right', ' leading space', 'tumor_detected', '1.2.840.10008']) {
      expect(csvField(plain), plain).toBe(plain.includes(',') ? `"${plain}"` : plain);
    }
  });

  it('writes a header and CRLF records in the given column order', () => {
    expect(toCsv(['b', 'a'], [{ a: 1, b: 'x' }, { a: 2 }])).toBe('b,a\r\nx,1\r\n,2\r\n');
  });
});

describe('XML', () => {
  it('escapes markup and drops characters XML 1.0 forbids', () => {
    expect(escapeXml(`<a href="x">&'`)).toBe('&lt;a href=&quot;x&quot;&gt;&amp;&apos;');
    expect(escapeXml('bell\u0007 and nul\u0000')).toBe('bell and nul');
  });

  it('keeps carriage returns through a parser and drops unpaired surrogates', async () => {
    const { XMLParser } = await import('fast-xml-parser');
    const doc = toXmlDocument('root', { v: 'line 1\r\nline 2 & more' }, {});
    expect(new XMLParser({ htmlEntities: true }).parse(doc).root.v).toBe('line 1\r\nline 2 & more');
    expect(escapeXml('ok \uD83D\uDE00 lone \uD83D end \uDE00.')).toBe('ok \uD83D\uDE00 lone  end .');
  });

  it('produces well-formed documents from any strings', () => {
    const nasty = ['</x>', ']]>', '\u0001\u0002', '"\'&<>', 'Ünïcödé 漢字'];
    const doc = toXmlDocument('root', { items: nasty.map((v) => ({ v })), empty: null, n: 3, yes: true }, { items: 'item' });
    expect(XMLValidator.validate(doc)).toBe(true);
    expect(doc).toContain('<item><v>&lt;/x&gt;</v></item>');
  });

  it('refuses element names that are not XML names', () => {
    expect(() => toXmlDocument('root', { 'bad name': 1 }, {})).toThrow(/not an XML element name/);
  });
});
